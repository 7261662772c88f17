// The software verbs device's extended context verbs: ibv_query_device_ex, the context's
// command fd and importing a context's objects through it, parent domains, ibv_advise_mr
// (on-demand paging prefetch) and ibv_rereg_mr. Threading: as verbs.h (the engine through
// the driver, under its lock; object tables under Device::mu).
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/c_enum.h"
#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

int open_cmd_fd() { return ::memfd_create("mrc0-cmd", MFD_CLOEXEC); }

ibv_odp_caps odp_caps() {
  ibv_odp_caps c{};
  c.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  c.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                     IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                     IBV_ODP_SUPPORT_SRQ_RECV | IBV_ODP_SUPPORT_ATOMIC;
  // UD sends gather at post time and receives scatter where the data lands, like RC's.
  c.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
  return c;
}

int query_device_ex(ibv_context* c, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) {
  if (!attr) return fail(EINVAL, "ibv_query_device_ex: attr is NULL");
  if (input && input->comp_mask)
    return fail(EINVAL, "ibv_query_device_ex: input comp_mask 0x%x (mrc0 knows none)",
                input->comp_mask);
  if (attr_size < sizeof(ibv_device_attr))
    return fail(EINVAL, "ibv_query_device_ex: attr_size %zu below ibv_device_attr's %zu", attr_size,
                sizeof(ibv_device_attr));
  ibv_device_attr_ex a{};
  if (const int r = query_device(c, &a.orig_attr)) return r;
  a.odp_caps = odp_caps();
  // XRC moves data as RC does (xrc.cc), through the same engine paths.
  a.xrc_odp_caps = a.odp_caps.per_transport_caps.rc_odp_caps;
  a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
  a.tm_caps = tm_caps();  // tm.cc
  // An older caller's struct is a prefix of ours; a newer one's tail stays zero.
  std::memset(attr, 0, attr_size);
  std::memcpy(attr, &a, std::min(attr_size, sizeof a));
  return 0;
}

int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg, uint32_t n) {
  const int adv = raw(advice);
  if (adv != IBV_ADVISE_MR_ADVICE_PREFETCH && adv != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      adv != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return fail(EINVAL, "ibv_advise_mr: advice %d (PREFETCH, PREFETCH_WRITE, PREFETCH_NO_FAULT)",
                adv);
  if (flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH))
    return fail(EINVAL, "ibv_advise_mr: flags 0x%x (FLUSH is the one flag)", flags);
  if (n == 0 || !sg) return fail(EINVAL, "ibv_advise_mr: no SGEs");
  Device* dev = device_of(pd->context);
  // Validate every SGE, then fault its pages in.
  for (uint32_t i = 0; i < n; ++i) {
    auto ok = dev->driver->with_engine([&](engine::Engine& e) {
      return e.check_mr(sg[i].lkey, sg[i].addr, sg[i].length, pd->handle);
    });
    if (!ok)
      return fail(EINVAL, "ibv_advise_mr: SGE %u (lkey 0x%x, %u bytes at 0x%llx): %s", i,
                  sg[i].lkey, sg[i].length, static_cast<unsigned long long>(sg[i].addr),
                  engine::to_string(ok.error()));
  }
  if (adv == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) return 0;  // present pages are mapped
  const int how =
      adv == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (uint32_t i = 0; i < n; ++i) {
    if (sg[i].length == 0) continue;
    const uintptr_t lo = sg[i].addr & ~(page - 1);
    const uintptr_t hi = (sg[i].addr + sg[i].length + page - 1) & ~(page - 1);
    if (::madvise(reinterpret_cast<void*>(lo), hi - lo, how) != 0) {
      const int e = errno;
      if (e == EINVAL) return 0;  // a kernel before 5.14 (no MADV_POPULATE_*): advice only
      return fail(e == ENOMEM ? EFAULT : e, "ibv_advise_mr: SGE %u: %s", i, std::strerror(e));
    }
  }
  return 0;
}

int rereg_mr(ibv_mr* m, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  auto input = [](int err, const char* what) {
    fail(err, "ibv_rereg_mr: %s", what);
    return static_cast<int>(IBV_REREG_MR_ERR_INPUT);
  };
  if (flags == 0 || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED))
    return input(EINVAL, "flags: one or more of CHANGE_TRANSLATION, CHANGE_PD, CHANGE_ACCESS");
  Mr* mr = reinterpret_cast<Mr*>(m);
  ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : m->pd;
  if (!new_pd || new_pd->context != m->context)
    return input(EINVAL, "the new PD must be one of the MR's context");
  const bool translate = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
  if (translate && (!addr || length == 0))
    return input(EINVAL, "CHANGE_TRANSLATION needs an address and a length");
  void* new_addr = translate ? addr : m->addr;
  const size_t new_len = translate ? length : m->length;
  const uint64_t iova = translate ? reinterpret_cast<uint64_t>(addr) : mr->iova;
  const unsigned new_access =
      (flags & IBV_REREG_MR_CHANGE_ACCESS) ? static_cast<unsigned>(access) : mr->access;
  unsigned engine_access = 0;
  if (mr_access("ibv_rereg_mr", new_addr, new_len, new_access, &engine_access) != 0)
    return IBV_REREG_MR_ERR_INPUT;
  // In place, under the same keys (as a NIC's rereg keeps them): receives already posted are
  // checked against the new registration when their data lands.
  Device* dev = device_of(m->context);
  auto r = dev->driver->with_engine([&](engine::Engine& e) {
    return e.reregister_mr(m->lkey, new_addr, new_len, iova, engine_access, new_pd->handle);
  });
  if (!r) {
    fail(to_errno(r.error()), "ibv_rereg_mr: %s", engine::to_string(r.error()));
    return IBV_REREG_MR_ERR_CMD;
  }
  if (new_pd != m->pd) {
    --pd_of(m->pd)->users;
    ++pd_of(new_pd)->users;
    m->pd = new_pd;
  }
  m->addr = new_addr;
  m->length = new_len;
  mr->iova = iova;
  mr->access = new_access;
  return 0;
}

ibv_pd* alloc_parent_domain(ibv_context* c, ibv_parent_domain_init_attr* a) {
  if (!a || !a->pd || a->pd->context != c) {
    fail(EINVAL, "ibv_alloc_parent_domain: attr->pd must be a PD of this context");
    return nullptr;
  }
  Pd* protection = pd_of(a->pd);
  if (protection->protection) {
    fail(EINVAL, "ibv_alloc_parent_domain: attr->pd is itself a parent domain");
    return nullptr;
  }
  const uint32_t known =
      IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (a->comp_mask & ~known) {
    fail(EINVAL, "ibv_alloc_parent_domain: comp_mask 0x%x (ALLOCATORS, PD_CONTEXT)",
         a->comp_mask & ~known);
    return nullptr;
  }
  if (a->td) {
    fail(EOPNOTSUPP, "ibv_alloc_parent_domain: thread domains are not supported by mrc0");
    return nullptr;
  }
  // The allocators are for buffers a provider shares with its NIC; mrc0 has none to make.
  auto* pd = new Pd;
  pd->pd.context = c;
  pd->pd.handle = a->pd->handle;  // MRs and QPs on it are in the protection domain
  pd->protection = protection;
  ++protection->users;
  return &pd->pd;
}

namespace {
// The open context whose command fd is `fd` or a duplicate of it (same open file), or null.
// Under dev->mu.
Context* cmd_fd_owner(Device* dev, int fd) {
  struct stat want {};
  if (fd < 0 || ::fstat(fd, &want) != 0) return nullptr;
  for (Context* c : dev->open) {
    struct stat have {};
    if (c->cmd_fd >= 0 && ::fstat(c->cmd_fd, &have) == 0 && have.st_dev == want.st_dev &&
        have.st_ino == want.st_ino)
      return c;
  }
  return nullptr;
}
}  // namespace

bool is_cmd_fd(int fd) {
  Device* dev = the_device();
  if (!dev) return false;
  std::lock_guard lock(dev->mu);
  return cmd_fd_owner(dev, fd) != nullptr;
}

ibv_context* import_device(int fd) {
  if (!is_cmd_fd(fd)) {
    fail(EINVAL, "ibv_import_device: fd %d is no mrc0 context's command fd", fd);
    return nullptr;
  }
  Device* dev = the_device();
  ibv_context* c = open_device(&dev->dev);
  if (!c) return nullptr;
  Context* ctx = ctx_of(c);
  ::close(ctx->cmd_fd);  // the imported context owns `fd` (closed with it, as libibverbs)
  ctx->cmd_fd = c->cmd_fd = fd;
  return c;
}

ibv_pd* import_pd(ibv_context* c, uint32_t handle) {
  Device* dev = device_of(c);
  std::lock_guard lock(dev->mu);
  auto it = dev->pds.find(handle);
  if (it == dev->pds.end()) {
    fail(EINVAL, "ibv_import_pd: no PD %u on mrc0", handle);
    return nullptr;
  }
  auto* pd = new Pd;
  pd->pd.context = c;
  pd->pd.handle = handle;
  pd->imported = true;
  return &pd->pd;
}

void unimport_pd(ibv_pd* pd) { delete pd_of(pd); }

ibv_mr* import_mr(ibv_pd* pd, uint32_t handle) {
  Device* dev = device_of(pd->context);
  std::lock_guard lock(dev->mu);
  auto it = dev->mrs.find(handle);
  if (it == dev->mrs.end() || it->second->mr.pd->handle != pd->handle) {
    fail(EINVAL, "ibv_import_mr: no MR %u in PD %u on mrc0", handle, pd->handle);
    return nullptr;
  }
  auto* mr = new Mr(*it->second);
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  mr->imported = true;
  ++pd_of(pd)->users;
  return &mr->mr;
}

void unimport_mr(ibv_mr* mr) {
  --pd_of(mr->pd)->users;
  delete reinterpret_cast<Mr*>(mr);
}

}  // namespace mrc::verbs

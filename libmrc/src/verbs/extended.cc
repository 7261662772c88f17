// The software verbs device's extended context verbs: ibv_query_device_ex, the context's
// command fd, ibv_advise_mr (on-demand paging prefetch) and ibv_rereg_mr. Threading: as
// verbs.h (the engine through the driver, under its lock).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/c_enum.h"
#include "verbs/internal.h"
#include "verbs/objects.h"
#include "verbs/verbs.h"

namespace mrc::verbs {

int open_cmd_fd() { return ::memfd_create("mrc0-cmd", MFD_CLOEXEC); }

ibv_odp_caps odp_caps() {
  ibv_odp_caps c{};
  c.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  c.per_transport_caps.rc_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
  return c;
}

int query_device_ex(ibv_context* c, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) {
  if (input && input->comp_mask)
    return fail(EINVAL, "ibv_query_device_ex: input comp_mask 0x%x (mrc0 knows none)",
                input->comp_mask);
  if (attr_size < sizeof(ibv_device_attr))
    return fail(EINVAL, "ibv_query_device_ex: attr_size %zu below ibv_device_attr's %zu",
                attr_size, sizeof(ibv_device_attr));
  ibv_device_attr_ex a{};
  if (const int r = query_device(c, &a.orig_attr)) return r;
  a.odp_caps = odp_caps();
  a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
  // An older caller's struct is a prefix of ours; a newer one's tail stays zero.
  std::memset(attr, 0, attr_size);
  std::memcpy(attr, &a, std::min(attr_size, sizeof a));
  return 0;
}

int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg,
              uint32_t n) {
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
  const int how = adv == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE ? MADV_POPULATE_WRITE
                                                             : MADV_POPULATE_READ;
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
    return input(EINVAL, "flags must be a non-empty set of CHANGE_TRANSLATION, CHANGE_PD, "
                         "CHANGE_ACCESS");
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

}  // namespace mrc::verbs

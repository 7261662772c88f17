// libmrc-verbs-shim.so: LD_PRELOAD it and unmodified verbs programs (perftest, ibv_devinfo,
// ibv_rc_pingpong) run over MRC. It exports every ibv_* symbol those programs import; each
// goes to libmrc's software verbs device (mrc/verbs/verbs.h) for MRC objects, and to
// the real libibverbs (dlvsym RTLD_NEXT, at the version the program asked for) for real
// devices, which the device list shows after mrc0 when the host has any.
//
// Why every symbol: the ibv_context of mrc0 is a verbs_context whose private part belongs to
// the real libibverbs in a real one; a real export handed an MRC object would crash.
// Binding: exports.map is an anonymous version script (no version definitions), so the
// dynamic linker binds the programs' versioned references (ibv_open_device@IBVERBS_1.1) to
// these definitions (docs/verbs-shim.md, "The shim").
// Unsupported verbs (dma-buf, ECE, device memory) fail with EOPNOTSUPP
// and one line on stderr.
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "mrc/observe/publisher.h"
#include "mrc/verbs/verbs.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace v = mrc::verbs;

namespace {

// The real libibverbs' definition of `name` at `version`; null (logged once) if absent.
void* real_symbol(const char* name, const char* version) {
  void* f = ::dlvsym(RTLD_NEXT, name, version);
  if (!f) {
    static std::once_flag once;
    std::call_once(once, [&] {
      std::fprintf(stderr, "mrc-verbs-shim: no real %s@%s to forward to (%s)\n", name, version,
                   "is libibverbs loaded?");
    });
  }
  return f;
}

template <class F>
F* real(const char* name, const char* version) {
  return reinterpret_cast<F*>(real_symbol(name, version));
}
#define REAL(fn, ver) real<decltype(fn)>(#fn, ver)

// A null object or attribute pointer where the verb needs one. The real libibverbs would
// crash on it (it reads pd->context to pick the provider); the shim fails the call as verbs
// fails one: errno EINVAL, and `ret` (NULL for a verb that makes an object; EINVAL, -1 or
// -EINVAL for the others, as each verb reports errors), with one line on stderr.
template <class R>
R null_arg(const char* verb, const char* what, R ret) {
  std::fprintf(stderr, "mrc-verbs-shim: %s: %s is NULL\n", verb, what);
  errno = EINVAL;
  return ret;
}
constexpr std::nullptr_t kNone = nullptr;

int unsupported(const char* what) {
  std::fprintf(stderr, "mrc-verbs-shim: %s is not supported on MRC devices\n", what);
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

bool ours(const ibv_context* c) { return v::is_mrc_context(c); }

// Device lists handed out that hold real devices too: ours -> the real list.
std::mutex lists_mu;
std::map<ibv_device**, ibv_device**> real_lists;
thread_local bool in_list = false;

}  // namespace

extern "C" {

// ---- Devices ---------------------------------------------------------------------------
ibv_device** ibv_get_device_list(int* num) {
  int n_mrc = 0;
  ibv_device** mine = v::get_device_list(&n_mrc);
  if (!mine) return nullptr;
  int n_real = 0;
  ibv_device** theirs = nullptr;
  if (!in_list) {  // the real list calls back into exported symbols: no recursion
    in_list = true;
    // Quietly none when no real libibverbs is loaded (a program linked to the shim only).
    if (auto* f = reinterpret_cast<decltype(ibv_get_device_list)*>(
            ::dlvsym(RTLD_NEXT, "ibv_get_device_list", "IBVERBS_1.1")))
      theirs = f(&n_real);
    in_list = false;
  }
  if (!theirs || n_real == 0) {
    if (theirs) REAL(ibv_free_device_list, "IBVERBS_1.1")(theirs);
    if (num) *num = n_mrc;
    return mine;
  }
  auto** all = static_cast<ibv_device**>(std::calloc(n_mrc + n_real + 1, sizeof(ibv_device*)));
  if (!all) {
    errno = ENOMEM;
    return nullptr;
  }
  std::memcpy(all, mine, n_mrc * sizeof(ibv_device*));
  std::memcpy(all + n_mrc, theirs, n_real * sizeof(ibv_device*));
  v::free_device_list(mine);
  std::lock_guard lock(lists_mu);
  real_lists[all] = theirs;
  if (num) *num = n_mrc + n_real;
  return all;
}

void ibv_free_device_list(ibv_device** list) {
  ibv_device** theirs = nullptr;
  {
    std::lock_guard lock(lists_mu);
    if (auto it = real_lists.find(list); it != real_lists.end()) {
      theirs = it->second;
      real_lists.erase(it);
    }
  }
  if (theirs) REAL(ibv_free_device_list, "IBVERBS_1.1")(theirs);
  std::free(list);
}

const char* ibv_get_device_name(ibv_device* d) { return d ? d->name : nullptr; }

// mrc0 pins no memory for a NIC to DMA into: its driver thread reaches the app's pages
// through the process's own mappings, so after fork() the parent's writes land in the
// parent's copy-on-write pages as they should. Fork needs no preparation for it: what the
// real library answers for its devices (0, as programs expect), or 0 / UNNEEDED without it.
int ibv_fork_init() {
  auto* f = reinterpret_cast<int (*)()>(::dlvsym(RTLD_NEXT, "ibv_fork_init", "IBVERBS_1.1"));
  return f ? f() : 0;
}

ibv_fork_status ibv_is_fork_initialized() {
  auto* f = reinterpret_cast<ibv_fork_status (*)()>(
      ::dlvsym(RTLD_NEXT, "ibv_is_fork_initialized", "IBVERBS_1.13"));
  return f ? f() : IBV_FORK_UNNEEDED;
}

__be64 ibv_get_device_guid(ibv_device* d) {
  if (!d) return null_arg("ibv_get_device_guid", "device", __be64{0});
  return v::is_mrc_device(d) ? v::device_guid(d) : REAL(ibv_get_device_guid, "IBVERBS_1.1")(d);
}

int ibv_get_device_index(ibv_device* d) {
  if (!d) return null_arg("ibv_get_device_index", "device", -1);
  return v::is_mrc_device(d) ? 0 : REAL(ibv_get_device_index, "IBVERBS_1.9")(d);
}

ibv_context* ibv_open_device(ibv_device* d) {
  if (!d) return null_arg("ibv_open_device", "device", kNone);
  if (v::is_mrc_device(d)) {
    v::set_driver_observer(&mrc::observe::attach_publisher);  // mrcctl sees the device
    return v::open_device(d);
  }
  auto* f = REAL(ibv_open_device, "IBVERBS_1.1");
  return f ? f(d) : (errno = ENOSYS, nullptr);
}

int ibv_close_device(ibv_context* c) {
  if (!c) return null_arg("ibv_close_device", "context", EINVAL);
  return ours(c) ? v::close_device(c) : REAL(ibv_close_device, "IBVERBS_1.1")(c);
}

int ibv_query_device(ibv_context* c, ibv_device_attr* a) {
  if (!c) return null_arg("ibv_query_device", "context", EINVAL);
  if (!a) return null_arg("ibv_query_device", "attr", EINVAL);
  return ours(c) ? v::query_device(c, a) : REAL(ibv_query_device, "IBVERBS_1.1")(c, a);
}

int ibv_query_port(ibv_context* c, uint8_t port, _compat_ibv_port_attr* a) {
  if (!c) return null_arg("ibv_query_port", "context", EINVAL);
  if (!a) return null_arg("ibv_query_port", "port_attr", EINVAL);
  if (!ours(c)) return REAL(ibv_query_port, "IBVERBS_1.1")(c, port, a);
  ibv_port_attr full;
  const int r = v::query_port(c, port, &full);
  // The old struct (opaque in the headers) is the new one up to link_layer.
  if (r == 0) std::memcpy(a, &full, offsetof(ibv_port_attr, flags));
  return r;
}

int ibv_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  if (!c) return null_arg("ibv_query_gid", "context", -1);
  if (!gid) return null_arg("ibv_query_gid", "gid", -1);
  if (!ours(c)) return REAL(ibv_query_gid, "IBVERBS_1.1")(c, port, index, gid);
  return v::query_gid(c, port, index, gid) ? -1 : 0;  // libibverbs: -1, errno set
}

int _ibv_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e,
                      uint32_t flags, size_t size) {
  if (!c) return null_arg("_ibv_query_gid_ex", "context", EINVAL);
  if (!e) return null_arg("_ibv_query_gid_ex", "entry", EINVAL);
  if (!ours(c)) return REAL(_ibv_query_gid_ex, "IBVERBS_1.11")(c, port, index, e, flags, size);
  if (size < sizeof(ibv_gid_entry)) return EINVAL;
  return v::query_gid_ex(c, port, index, e);
}

// Private to rdma-core (ibv_devinfo uses it); `type` is enum ibv_gid_type_sysfs (IB/RoCE v1 =
// 0, RoCE v2 = 1). An empty entry is 0 ("IB/RoCE v1") and success, as libibverbs answers for a
// kernel device's (verbs.c: "Preserve API behavior for empty GID").
int ibv_query_gid_type(ibv_context* c, uint8_t port, unsigned index, int* type) {
  if (!c) return null_arg("ibv_query_gid_type", "context", -1);
  if (!type) return null_arg("ibv_query_gid_type", "type", -1);
  if (!ours(c)) {
    auto* f = reinterpret_cast<int (*)(ibv_context*, uint8_t, unsigned, int*)>(
        real_symbol("ibv_query_gid_type", "IBVERBS_PRIVATE_34"));
    return f ? f(c, port, index, type) : (errno = ENOSYS, -1);
  }
  ibv_gid_entry e;
  const int r = v::query_gid_ex(c, port, index, &e);
  if (r != 0 && r != ENODATA) return -1;
  *type = r == ENODATA ? 0 : 1;
  return 0;
}

// Not in the public headers: ibv_devinfo reads board_id and the like through it.
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  int r = 0;
  if (v::read_sysfs(dir, file, buf, size, &r)) return r;
  auto* f = reinterpret_cast<int (*)(const char*, const char*, char*, size_t)>(
      real_symbol("ibv_read_sysfs_file", "IBVERBS_1.0"));
  return f ? f(dir, file, buf, size) : (errno = ENOSYS, -1);
}

ssize_t _ibv_query_gid_table(ibv_context* c, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  if (!c) return null_arg("_ibv_query_gid_table", "context", ssize_t{-EINVAL});
  if (!entries) return null_arg("_ibv_query_gid_table", "entries", ssize_t{-EINVAL});
  if (!ours(c))
    return REAL(_ibv_query_gid_table, "IBVERBS_1.11")(c, entries, max_entries, flags, entry_size);
  if (entry_size != sizeof(ibv_gid_entry)) return -EINVAL;  // rdma-core 44's is the only one
  return v::query_gid_table(c, entries, max_entries);
}

int ibv_get_pkey_index(ibv_context* c, uint8_t port, __be16 pkey) {
  if (!c) return null_arg("ibv_get_pkey_index", "context", -1);
  if (!ours(c)) return REAL(ibv_get_pkey_index, "IBVERBS_1.5")(c, port, pkey);
  uint16_t p = 0;
  if (v::query_pkey(c, port, 0, &p) == 0 && p == pkey) return 0;  // the only entry
  errno = ENOENT;
  return -1;
}

int ibv_query_pkey(ibv_context* c, uint8_t port, int index, __be16* pkey) {
  if (!c) return null_arg("ibv_query_pkey", "context", -1);
  if (!pkey) return null_arg("ibv_query_pkey", "pkey", -1);
  return ours(c) ? v::query_pkey(c, port, index, pkey)
                 : REAL(ibv_query_pkey, "IBVERBS_1.1")(c, port, index, pkey);
}

int ibv_get_async_event(ibv_context* c, ibv_async_event* e) {
  if (!c) return null_arg("ibv_get_async_event", "context", -1);
  if (!e) return null_arg("ibv_get_async_event", "event", -1);
  return ours(c) ? v::get_async_event(c, e) : REAL(ibv_get_async_event, "IBVERBS_1.1")(c, e);
}

void ibv_ack_async_event(ibv_async_event* e) {
  if (!e) return (void)null_arg("ibv_ack_async_event", "event", 0);
  // Our events need no ack; a real one is acked by the real library (it counts them).
  const ibv_context* c = nullptr;
  switch (e->event_type) {
    case IBV_EVENT_CQ_ERR: c = e->element.cq->context; break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: c = e->element.srq->context; break;
    case IBV_EVENT_WQ_FATAL: c = e->element.wq->context; break;
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE: break;
    default: c = e->element.qp->context; break;
  }
  if (c && ours(c)) return v::ack_async_event(e);
  if (!c) return;  // port/device events: only real devices raise them
  REAL(ibv_ack_async_event, "IBVERBS_1.1")(e);
}

// ---- PD, MR ----------------------------------------------------------------------------
ibv_pd* ibv_alloc_pd(ibv_context* c) {
  if (!c) return null_arg("ibv_alloc_pd", "context", kNone);
  return ours(c) ? v::alloc_pd(c) : REAL(ibv_alloc_pd, "IBVERBS_1.1")(c);
}

int ibv_dealloc_pd(ibv_pd* pd) {
  if (!pd) return null_arg("ibv_dealloc_pd", "pd", EINVAL);
  return ours(pd->context) ? v::dealloc_pd(pd) : REAL(ibv_dealloc_pd, "IBVERBS_1.1")(pd);
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  if (!pd) return null_arg("ibv_reg_mr", "pd", kNone);
  return ours(pd->context) ? v::reg_mr(pd, addr, len, reinterpret_cast<uintptr_t>(addr), access)
                           : REAL(ibv_reg_mr, "IBVERBS_1.1")(pd, addr, len, access);
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t len, uint64_t iova, int access) {
  if (!pd) return null_arg("ibv_reg_mr_iova", "pd", kNone);
  return ours(pd->context) ? v::reg_mr(pd, addr, len, iova, access)
                           : REAL(ibv_reg_mr_iova, "IBVERBS_1.7")(pd, addr, len, iova, access);
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t len, uint64_t iova, unsigned access) {
  if (!pd) return null_arg("ibv_reg_mr_iova2", "pd", kNone);
  return ours(pd->context) ? v::reg_mr(pd, addr, len, iova, access)
                           : REAL(ibv_reg_mr_iova2, "IBVERBS_1.8")(pd, addr, len, iova, access);
}

int ibv_dereg_mr(ibv_mr* mr) {
  if (!mr) return null_arg("ibv_dereg_mr", "mr", EINVAL);
  return ours(mr->context) ? v::dereg_mr(mr) : REAL(ibv_dereg_mr, "IBVERBS_1.1")(mr);
}

int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t len, int access) {
  if (!mr) return null_arg("ibv_rereg_mr", "mr", int{IBV_REREG_MR_ERR_INPUT});
  if (!ours(mr->context))
    return REAL(ibv_rereg_mr, "IBVERBS_1.1")(mr, flags, pd, addr, len, access);
  return v::rereg_mr(mr, flags, pd, addr, len, access);
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t len, uint64_t iova, int fd,
                          int access) {
  if (!pd) return null_arg("ibv_reg_dmabuf_mr", "pd", kNone);
  if (!ours(pd->context))
    return REAL(ibv_reg_dmabuf_mr, "IBVERBS_1.12")(pd, offset, len, iova, fd, access);
  unsupported("ibv_reg_dmabuf_mr (dma-buf memory)");
  return nullptr;
}

// ---- CQs and channels ------------------------------------------------------------------
ibv_comp_channel* ibv_create_comp_channel(ibv_context* c) {
  if (!c) return null_arg("ibv_create_comp_channel", "context", kNone);
  return ours(c) ? v::create_comp_channel(c) : REAL(ibv_create_comp_channel, "IBVERBS_1.0")(c);
}

int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
  if (!ch) return null_arg("ibv_destroy_comp_channel", "channel", EINVAL);
  return ours(ch->context) ? v::destroy_comp_channel(ch)
                           : REAL(ibv_destroy_comp_channel, "IBVERBS_1.0")(ch);
}

ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch,
                      int vector) {
  if (!c) return null_arg("ibv_create_cq", "context", kNone);
  return ours(c) ? v::create_cq(c, cqe, cq_context, ch, vector)
                 : REAL(ibv_create_cq, "IBVERBS_1.1")(c, cqe, cq_context, ch, vector);
}

int ibv_destroy_cq(ibv_cq* cq) {
  if (!cq) return null_arg("ibv_destroy_cq", "cq", EINVAL);
  return ours(cq->context) ? v::destroy_cq(cq) : REAL(ibv_destroy_cq, "IBVERBS_1.1")(cq);
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (!cq) return null_arg("ibv_resize_cq", "cq", EINVAL);
  return ours(cq->context) ? v::resize_cq(cq, cqe) : REAL(ibv_resize_cq, "IBVERBS_1.1")(cq, cqe);
}

int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context) {
  if (!ch) return null_arg("ibv_get_cq_event", "channel", -1);
  if (!cq) return null_arg("ibv_get_cq_event", "cq", -1);
  if (!cq_context) return null_arg("ibv_get_cq_event", "cq_context", -1);
  return ours(ch->context) ? v::get_cq_event(ch, cq, cq_context)
                           : REAL(ibv_get_cq_event, "IBVERBS_1.1")(ch, cq, cq_context);
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned n) {
  if (!cq) return (void)null_arg("ibv_ack_cq_events", "cq", 0);
  ours(cq->context) ? v::ack_cq_events(cq, n) : REAL(ibv_ack_cq_events, "IBVERBS_1.1")(cq, n);
}

// ---- QPs -------------------------------------------------------------------------------
ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  if (!pd) return null_arg("ibv_create_qp", "pd", kNone);
  if (!a) return null_arg("ibv_create_qp", "qp_init_attr", kNone);
  return ours(pd->context) ? v::create_qp(pd, a) : REAL(ibv_create_qp, "IBVERBS_1.1")(pd, a);
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  if (!qp) return null_arg("ibv_modify_qp", "qp", EINVAL);
  if (!a) return null_arg("ibv_modify_qp", "attr", EINVAL);
  return ours(qp->context) ? v::modify_qp(qp, a, mask)
                           : REAL(ibv_modify_qp, "IBVERBS_1.1")(qp, a, mask);
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* a, int mask, ibv_qp_init_attr* init) {
  if (!qp) return null_arg("ibv_query_qp", "qp", EINVAL);
  if (!a) return null_arg("ibv_query_qp", "attr", EINVAL);
  return ours(qp->context) ? v::query_qp(qp, a, mask, init)
                           : REAL(ibv_query_qp, "IBVERBS_1.1")(qp, a, mask, init);
}

int ibv_destroy_qp(ibv_qp* qp) {
  if (!qp) return null_arg("ibv_destroy_qp", "qp", EINVAL);
  return ours(qp->context) ? v::destroy_qp(qp) : REAL(ibv_destroy_qp, "IBVERBS_1.1")(qp);
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  if (!qp) return null_arg("ibv_qp_to_qp_ex", "qp", kNone);
  return ours(qp->context) ? v::qp_to_qp_ex(qp) : REAL(ibv_qp_to_qp_ex, "IBVERBS_1.6")(qp);
}

// MRC sprays a message over many paths: its bytes land in any order.
int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, uint32_t flags) {
  if (!qp) return null_arg("ibv_query_qp_data_in_order", "qp", 0);
  return ours(qp->context) ? 0 : REAL(ibv_query_qp_data_in_order, "IBVERBS_1.14")(qp, op, flags);
}

int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) {
  if (!qp) return null_arg("ibv_set_ece", "qp", EINVAL);
  return ours(qp->context) ? unsupported("ibv_set_ece (enhanced connection establishment)")
                           : REAL(ibv_set_ece, "IBVERBS_1.10")(qp, ece);
}

int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) {
  if (!qp) return null_arg("ibv_query_ece", "qp", EINVAL);
  return ours(qp->context) ? unsupported("ibv_query_ece (enhanced connection establishment)")
                           : REAL(ibv_query_ece, "IBVERBS_1.10")(qp, ece);
}

// ---- SRQs, address handles, multicast ------------------------------------------------------
ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* a) {
  if (!pd) return null_arg("ibv_create_srq", "pd", kNone);
  if (!a) return null_arg("ibv_create_srq", "srq_init_attr", kNone);
  return ours(pd->context) ? v::create_srq(pd, a) : REAL(ibv_create_srq, "IBVERBS_1.1")(pd, a);
}

int ibv_destroy_srq(ibv_srq* srq) {
  if (!srq) return null_arg("ibv_destroy_srq", "srq", EINVAL);
  return ours(srq->context) ? v::destroy_srq(srq) : REAL(ibv_destroy_srq, "IBVERBS_1.1")(srq);
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* a, int mask) {
  if (!srq) return null_arg("ibv_modify_srq", "srq", EINVAL);
  if (!a) return null_arg("ibv_modify_srq", "srq_attr", EINVAL);
  return ours(srq->context) ? v::modify_srq(srq, a, mask)
                            : REAL(ibv_modify_srq, "IBVERBS_1.1")(srq, a, mask);
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* a) {
  if (!srq) return null_arg("ibv_query_srq", "srq", EINVAL);
  if (!a) return null_arg("ibv_query_srq", "srq_attr", EINVAL);
  return ours(srq->context) ? v::query_srq(srq, a) : REAL(ibv_query_srq, "IBVERBS_1.1")(srq, a);
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* a) {
  if (!pd) return null_arg("ibv_create_ah", "pd", kNone);
  if (!a) return null_arg("ibv_create_ah", "ah_attr", kNone);
  if (!ours(pd->context)) return REAL(ibv_create_ah, "IBVERBS_1.1")(pd, a);
  return v::create_ah(pd, a);
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port) {
  if (!pd) return null_arg("ibv_create_ah_from_wc", "pd", kNone);
  if (!wc) return null_arg("ibv_create_ah_from_wc", "wc", kNone);
  if (!ours(pd->context)) return REAL(ibv_create_ah_from_wc, "IBVERBS_1.1")(pd, wc, grh, port);
  return v::create_ah_from_wc(pd, wc, grh, port);
}

int ibv_destroy_ah(ibv_ah* ah) {
  if (!ah) return null_arg("ibv_destroy_ah", "ah", EINVAL);
  return ours(ah->context) ? v::destroy_ah(ah) : REAL(ibv_destroy_ah, "IBVERBS_1.1")(ah);
}

int ibv_init_ah_from_wc(ibv_context* c, uint8_t port, ibv_wc* wc, ibv_grh* grh, ibv_ah_attr* ah) {
  if (!c) return null_arg("ibv_init_ah_from_wc", "context", EINVAL);
  if (!wc) return null_arg("ibv_init_ah_from_wc", "wc", EINVAL);
  if (!ah) return null_arg("ibv_init_ah_from_wc", "ah_attr", EINVAL);
  return ours(c) ? v::init_ah_from_wc(c, port, wc, grh, ah)
                 : REAL(ibv_init_ah_from_wc, "IBVERBS_1.1")(c, port, wc, grh, ah);
}

int ibv_resolve_eth_l2_from_gid(ibv_context* c, ibv_ah_attr* attr, uint8_t mac[ETHERNET_LL_SIZE],
                                uint16_t* vid) {
  if (!c) return null_arg("ibv_resolve_eth_l2_from_gid", "context", -1);
  if (!ours(c)) return REAL(ibv_resolve_eth_l2_from_gid, "IBVERBS_1.1")(c, attr, mac, vid);
  unsupported("ibv_resolve_eth_l2_from_gid (MRC has no L2 neighbours)");
  return -1;
}

// ---- Importing a context's objects through its command fd (mrc0: within the process) ------
ibv_context* ibv_import_device(int fd) {
  return v::is_cmd_fd(fd) ? v::import_device(fd) : REAL(ibv_import_device, "IBVERBS_1.10")(fd);
}

ibv_pd* ibv_import_pd(ibv_context* c, uint32_t handle) {
  if (!c) return null_arg("ibv_import_pd", "context", kNone);
  return ours(c) ? v::import_pd(c, handle) : REAL(ibv_import_pd, "IBVERBS_1.10")(c, handle);
}

void ibv_unimport_pd(ibv_pd* pd) {
  if (!pd) return (void)null_arg("ibv_unimport_pd", "pd", 0);
  if (ours(pd->context))
    v::unimport_pd(pd);
  else
    REAL(ibv_unimport_pd, "IBVERBS_1.10")(pd);
}

ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t handle) {
  if (!pd) return null_arg("ibv_import_mr", "pd", kNone);
  return ours(pd->context) ? v::import_mr(pd, handle)
                           : REAL(ibv_import_mr, "IBVERBS_1.10")(pd, handle);
}

void ibv_unimport_mr(ibv_mr* mr) {
  if (!mr) return (void)null_arg("ibv_unimport_mr", "mr", 0);
  if (ours(mr->context))
    v::unimport_mr(mr);
  else
    REAL(ibv_unimport_mr, "IBVERBS_1.10")(mr);
}

// ---- Unsupported on MRC: device memory -------------------------------------------------------
ibv_dm* ibv_import_dm(ibv_context* c, uint32_t handle) {
  if (!c) return null_arg("ibv_import_dm", "context", kNone);
  if (!ours(c)) return REAL(ibv_import_dm, "IBVERBS_1.13")(c, handle);
  unsupported("ibv_import_dm");
  return nullptr;
}

void ibv_unimport_dm(ibv_dm* dm) {
  if (!dm) return (void)null_arg("ibv_unimport_dm", "dm", 0);
  if (!ours(dm->context)) REAL(ibv_unimport_dm, "IBVERBS_1.13")(dm);
}

int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (!qp) return null_arg("ibv_attach_mcast", "qp", EINVAL);
  if (!gid) return null_arg("ibv_attach_mcast", "gid", EINVAL);
  return ours(qp->context) ? v::attach_mcast(qp, gid, lid)
                           : REAL(ibv_attach_mcast, "IBVERBS_1.1")(qp, gid, lid);
}

int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (!qp) return null_arg("ibv_detach_mcast", "qp", EINVAL);
  if (!gid) return null_arg("ibv_detach_mcast", "gid", EINVAL);
  return ours(qp->context) ? v::detach_mcast(qp, gid, lid)
                           : REAL(ibv_detach_mcast, "IBVERBS_1.1")(qp, gid, lid);
}

// ---- Strings (no objects; ours so a missing real library still prints them) -----------------
const char* ibv_wc_status_str(ibv_wc_status s) {
  static const char* const names[] = {
      "success", "local length error", "local QP operation error", "local EE context operation error",
      "local protection error", "Work Request Flushed Error", "memory management operation error",
      "bad response error", "local access error", "remote invalid request error",
      "remote access error", "remote operation error", "transport retry counter exceeded",
      "RNR retry counter exceeded", "local RDD violation error", "remote invalid RD request",
      "aborted error", "invalid EE context number", "invalid EE context state",
      "fatal error", "response timeout error", "general error", "TM error", "TM rendezvous error"};
  const auto i = static_cast<size_t>(s);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

}  // extern "C"

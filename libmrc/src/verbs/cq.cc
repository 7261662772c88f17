// PDs, MRs, CQs (plain and _ex) and completion channels of the software verbs device.
#include <arpa/inet.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

int to_errno(engine::Error e) {
  switch (e) {
    case engine::Error::kQueueFull:
    case engine::Error::kResourceLimit:
    case engine::Error::kWimmLimit:
      return ENOMEM;
    case engine::Error::kNotSupported:
      return EOPNOTSUPP;
    default:
      return EINVAL;
  }
}

ibv_wc to_wc(const engine::Completion& c) {
  ibv_wc w{};
  w.wr_id = c.wr_id;
  w.status = static_cast<ibv_wc_status>(c.status);
  switch (c.opcode) {
    case engine::WcOpcode::kSend: w.opcode = IBV_WC_SEND; break;
    case engine::WcOpcode::kWrite: w.opcode = IBV_WC_RDMA_WRITE; break;
    case engine::WcOpcode::kRead: w.opcode = IBV_WC_RDMA_READ; break;
    case engine::WcOpcode::kRecv: w.opcode = IBV_WC_RECV; break;
    case engine::WcOpcode::kRecvWriteImm: w.opcode = IBV_WC_RECV_RDMA_WITH_IMM; break;
    case engine::WcOpcode::kCmpSwap: w.opcode = IBV_WC_COMP_SWAP; break;
    case engine::WcOpcode::kFetchAdd: w.opcode = IBV_WC_FETCH_ADD; break;
    case engine::WcOpcode::kAtomicWrite:
      w.opcode = IBV_WC_ATOMIC_WRITE;
      break;
    case engine::WcOpcode::kBindMw:
      w.opcode = IBV_WC_BIND_MW;
      break;
    case engine::WcOpcode::kLocalInv:
      w.opcode = IBV_WC_LOCAL_INV;
      break;
    case engine::WcOpcode::kTmAdd:
      w.opcode = IBV_WC_TM_ADD;
      break;
    case engine::WcOpcode::kTmDel:
      w.opcode = IBV_WC_TM_DEL;
      break;
    case engine::WcOpcode::kTmSync:
      w.opcode = IBV_WC_TM_SYNC;
      break;
    case engine::WcOpcode::kTmRecv:
      w.opcode = IBV_WC_TM_RECV;
      break;
    case engine::WcOpcode::kTmNoTag:
      w.opcode = IBV_WC_TM_NO_TAG;
      break;
  }
  w.byte_len = c.byte_len;
  w.qp_num = c.qpn;
  if (c.has_imm) {
    w.wc_flags |= IBV_WC_WITH_IMM;
    w.imm_data = htonl(c.imm);
  }
  if (c.has_inv) {  // a SEND_WITH_INV's receive: the window it invalidated, host order
    w.wc_flags |= IBV_WC_WITH_INV;
    w.invalidated_rkey = c.imm;
  }
  // Tag matching (tm.cc): the tag and app context are read with ibv_wc_read_tm_info.
  if (c.tm_flags & engine::tm_flag::kSyncReq) w.wc_flags |= IBV_WC_TM_SYNC_REQ;
  if (c.tm_flags & engine::tm_flag::kMatch) w.wc_flags |= IBV_WC_TM_MATCH;
  if (c.tm_flags & engine::tm_flag::kDataValid) w.wc_flags |= IBV_WC_TM_DATA_VALID;
  if (c.src_qpn) {  // a UD receive: its buffer starts with the sender's GRH (ud.cc)
    w.src_qp = c.src_qpn;
    w.wc_flags |= IBV_WC_GRH;
  }
  return w;
}

// ---- PD, MR ----------------------------------------------------------------------------
ibv_pd* alloc_pd(ibv_context* c) {
  auto* pd = new Pd;
  pd->pd.context = c;
  static std::atomic<uint32_t> handles{1};
  pd->pd.handle = handles++;
  Device* dev = device_of(c);
  std::lock_guard lock(dev->mu);
  dev->pds[pd->pd.handle] = pd;
  return &pd->pd;
}

int dealloc_pd(ibv_pd* pd) {
  Pd* p = pd_of(pd);
  if (const uint32_t n = p->users.load())
    return fail(EBUSY, "ibv_dealloc_pd: %u MRs, QPs and parent domains still use the PD", n);
  if (p->protection) {
    --p->protection->users;
  } else if (!p->imported) {
    Device* dev = device_of(pd->context);
    std::lock_guard lock(dev->mu);
    dev->pds.erase(pd->handle);
  }
  delete p;
  return 0;
}

int mr_access(const char* verb, const void* addr, size_t length, unsigned access,
              unsigned* engine_access) {
  // Optional bits (IBV_ACCESS_OPTIONAL_RANGE, e.g. RELAXED_ORDERING) are hints: accepted.
  const unsigned required = access & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  if ((required & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(required & IBV_ACCESS_LOCAL_WRITE))
    return fail(EINVAL, "%s: remote write or atomic access needs IBV_ACCESS_LOCAL_WRITE", verb);
  // HUGETLB says the range is backed by huge pages (a kernel driver maps it so): mrc0 reads and
  // writes the memory where it is, whatever backs it, so it is accepted and changes nothing.
  const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND |
                         IBV_ACCESS_HUGETLB;
  if (required & ~known)
    return fail(EOPNOTSUPP, "%s: access flags 0x%x are not supported by mrc0", verb,
                required & ~known);
  if (is_implicit_odp(addr, length, access)) {
    // The whole address space: a peer could name any address, mapped or not.
    if (required & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC))
      return fail(EINVAL, "%s: an implicit ODP MR (NULL, SIZE_MAX) is local-only on mrc0", verb);
  } else if (length == 0 || length > engine::kMaxMessage * 64ull) {
    return fail(EINVAL, "%s: length %zu out of range", verb, length);
  }
  *engine_access = required & 0xf;
  return 0;
}

ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  unsigned engine_access = 0;
  if (mr_access("ibv_reg_mr", addr, length, access, &engine_access) != 0) return nullptr;
  // The implicit ODP MR is the engine's whole-space MR (iova 0, every address its own).
  if (is_implicit_odp(addr, length, access)) iova = 0;
  Device* dev = device_of(pd->context);
  auto key = dev->driver->with_engine([&](engine::Engine& e) {
    return e.register_mr(addr, length, iova, engine_access, pd->handle);
  });
  if (!key) {
    fail(to_errno(key.error()), "ibv_reg_mr: %s", engine::to_string(key.error()));
    return nullptr;
  }
  auto* mr = new Mr;
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  ++pd_of(pd)->users;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.handle = *key;
  mr->mr.lkey = mr->mr.rkey = *key;
  mr->iova = iova;
  mr->access = access;
  std::lock_guard lock(dev->mu);
  dev->mrs[*key] = mr;
  return &mr->mr;
}

int dereg_mr(ibv_mr* mr) {
  Device* dev = device_of(mr->context);
  auto r = dev->driver->with_engine([&](engine::Engine& e) { return e.deregister_mr(mr->lkey); });
  if (!r && r.error() == engine::Error::kBadState)  // memory windows are bound to it (mw.cc)
    return fail(EBUSY, "ibv_dereg_mr: memory windows are bound to the MR");
  if (!r) return fail(to_errno(r.error()), "ibv_dereg_mr: %s", engine::to_string(r.error()));
  {
    std::lock_guard lock(dev->mu);
    dev->mrs.erase(mr->lkey);
  }
  --pd_of(mr->pd)->users;
  delete reinterpret_cast<Mr*>(mr);
  return 0;
}

int resize_cq(ibv_cq* cq, int cqe) {
  if (cqe < 1 || static_cast<uint32_t>(cqe) > kMaxCqe)
    return fail(EINVAL, "ibv_resize_cq: cqe %d out of range 1..%u", cqe, kMaxCqe);
  Device* dev = device_of(cq->context);
  auto r = dev->driver->with_engine(
      [&](engine::Engine& e) { return e.resize_cq(cq_of(cq)->id, static_cast<uint32_t>(cqe)); });
  if (!r)
    return fail(EINVAL, "ibv_resize_cq: %d entries: fewer than the completions it holds", cqe);
  cq->cqe = cqe;
  return 0;
}

// ---- Channels --------------------------------------------------------------------------
ibv_comp_channel* create_comp_channel(ibv_context* c) {
  auto* ch = new Channel;
  ch->ch.context = c;
  ch->ch.fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ch->ch.fd < 0) {
    const int e = errno;
    delete ch;
    fail(e, "ibv_create_comp_channel: eventfd: %s", std::strerror(e));
    return nullptr;
  }
  return &ch->ch;
}

int destroy_comp_channel(ibv_comp_channel* c) {
  auto* ch = reinterpret_cast<Channel*>(c);
  if (c->refcnt > 0)
    return fail(EBUSY, "ibv_destroy_comp_channel: %d CQs still use it", c->refcnt);
  ::close(c->fd);
  delete ch;
  return 0;
}

void notify(Cq* cq) {
  Channel* ch = cq->channel;
  if (!ch) return;
  {
    std::lock_guard lock(ch->mu);
    ch->ready.push_back(cq);
  }
  const uint64_t one = 1;
  (void)!::write(ch->ch.fd, &one, sizeof one);
}

int get_cq_event(ibv_comp_channel* c, ibv_cq** cq, void** cq_context) {
  auto* ch = reinterpret_cast<Channel*>(c);
  uint64_t one;
  if (::read(c->fd, &one, sizeof one) != sizeof one) return -1;  // errno from read (EAGAIN)
  std::lock_guard lock(ch->mu);
  if (ch->ready.empty()) {
    errno = EAGAIN;
    return -1;
  }
  Cq* q = ch->ready.front();
  ch->ready.pop_front();
  *cq = ibv_cq_ex_to_cq(&q->cq);
  *cq_context = q->cq.cq_context;
  return 0;
}

void ack_cq_events(ibv_cq* cq, unsigned n) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += n;
  pthread_mutex_unlock(&cq->mutex);
}

// ---- CQs -------------------------------------------------------------------------------
namespace {

Cq* cq_ex_of(ibv_cq_ex* c) { return reinterpret_cast<Cq*>(c); }

// CQ_ex reading: `cur` is the completion at the cursor, taken from the engine one at a time
// (nothing held back here, so req_notify_cq and ibv_poll_cq see every completion not read).
int cqx_next(ibv_cq_ex* c) {
  Cq* q = cq_ex_of(c);
  Device* dev = device_of(c->context);
  const size_t n = dev->driver->peek_engine(
      [&](engine::Engine& e) { return e.poll_cq(q->id, std::span(&q->cur, 1)); });
  if (n == 0) return ENOENT;
  c->wr_id = q->cur.wr_id;
  c->status = static_cast<ibv_wc_status>(q->cur.status);
  return 0;
}
int cqx_start(ibv_cq_ex* c, ibv_poll_cq_attr*) {
  Cq* q = cq_ex_of(c);
  q->poll_mu.lock();
  int r = cqx_next(c);
  // Empty: the app waits, so receive and answer in its thread as poll_cq does.
  if (r == ENOENT && device_of(c->context)->driver->poll_progress()) r = cqx_next(c);
  if (r) q->poll_mu.unlock();  // verbs: no end_poll after a start_poll that found nothing
  return r;
}
void cqx_end(ibv_cq_ex* c) { cq_ex_of(c)->poll_mu.unlock(); }
ibv_wc_opcode cqx_opcode(ibv_cq_ex* c) { return to_wc(cq_ex_of(c)->cur).opcode; }
uint32_t cqx_zero32(ibv_cq_ex*) { return 0; }
uint8_t cqx_zero8(ibv_cq_ex*) { return 0; }
uint32_t cqx_byte_len(ibv_cq_ex* c) { return cq_ex_of(c)->cur.byte_len; }
// ibv_wc_read_imm_data, and ibv_wc_read_invalidated_rkey (host order) after a SEND_WITH_INV.
__be32 cqx_imm(ibv_cq_ex* c) {
  const engine::Completion& k = cq_ex_of(c)->cur;
  return k.has_inv ? k.imm : htonl(k.imm);
}
uint32_t cqx_qp_num(ibv_cq_ex* c) { return cq_ex_of(c)->cur.qpn; }
uint32_t cqx_src_qp(ibv_cq_ex* c) { return cq_ex_of(c)->cur.src_qpn; }
unsigned cqx_flags(ibv_cq_ex* c) { return to_wc(cq_ex_of(c)->cur).wc_flags; }
void cqx_tm_info(ibv_cq_ex* c, ibv_wc_tm_info* t) {
  const engine::Completion& k = cq_ex_of(c)->cur;
  t->tag = k.tag;
  t->priv = k.tm_priv;
}

Cq* make_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch) {
  if (cqe < 1 || static_cast<uint32_t>(cqe) > kMaxCqe) {
    fail(EINVAL, "ibv_create_cq: cqe %d out of range 1..%u", cqe, kMaxCqe);
    return nullptr;
  }
  Device* dev = device_of(c);
  auto id = dev->driver->with_engine(
      [&](engine::Engine& e) { return e.create_cq(static_cast<uint32_t>(cqe)); });
  if (!id) {
    fail(to_errno(id.error()), "ibv_create_cq: %s", engine::to_string(id.error()));
    return nullptr;
  }
  auto* q = new Cq;
  q->ctx = ctx_of(c);
  q->id = *id;
  q->channel = reinterpret_cast<Channel*>(ch);
  ibv_cq_ex& x = q->cq;
  x.context = c;
  x.channel = ch;
  x.cq_context = cq_context;
  x.handle = *id;
  x.cqe = cqe;
  pthread_mutex_init(&x.mutex, nullptr);
  pthread_cond_init(&x.cond, nullptr);
  x.start_poll = &cqx_start;
  x.next_poll = &cqx_next;
  x.end_poll = &cqx_end;
  x.read_opcode = &cqx_opcode;
  x.read_vendor_err = &cqx_zero32;
  x.read_byte_len = &cqx_byte_len;
  x.read_imm_data = &cqx_imm;
  x.read_qp_num = &cqx_qp_num;
  x.read_src_qp = &cqx_src_qp;
  x.read_wc_flags = &cqx_flags;
  x.read_slid = &cqx_zero32;
  x.read_sl = &cqx_zero8;
  x.read_dlid_path_bits = &cqx_zero8;
  x.read_tm_info = &cqx_tm_info;
  if (ch) ++ch->refcnt;
  return q;
}

}  // namespace

ibv_cq* create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch, int vector) {
  if (vector < 0 || vector >= c->num_comp_vectors) {
    fail(EINVAL, "ibv_create_cq: completion vector %d (mrc0 has 1)", vector);
    return nullptr;
  }
  Cq* q = make_cq(c, cqe, cq_context, ch);
  return q ? ibv_cq_ex_to_cq(&q->cq) : nullptr;
}

ibv_cq_ex* create_cq_ex(ibv_context* c, ibv_cq_init_attr_ex* a) {
  if (!a) {
    fail(EINVAL, "ibv_create_cq_ex: cq_attr is NULL");
    return nullptr;
  }
  const uint64_t supported = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                             IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                             IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_TM_INFO;
  if (a->wc_flags & ~supported) {
    fail(EOPNOTSUPP,
         "ibv_create_cq_ex: wc_flags 0x%llx are not supported by mrc0 (timestamps, "
         "flow tags, CVLAN)",
         static_cast<unsigned long long>(a->wc_flags & ~supported));
    return nullptr;
  }
  if (a->comp_vector >= static_cast<uint32_t>(c->num_comp_vectors)) {
    fail(EINVAL, "ibv_create_cq_ex: completion vector %u (mrc0 has 1)", a->comp_vector);
    return nullptr;
  }
  Cq* q = make_cq(c, static_cast<int>(a->cqe), a->cq_context, a->channel);
  return q ? &q->cq : nullptr;
}

int destroy_cq(ibv_cq* cq) {
  Cq* q = cq_of(cq);
  Device* dev = device_of(cq->context);
  auto r = dev->driver->with_engine([&](engine::Engine& e) { return e.destroy_cq(q->id); });
  if (!r) return fail(EBUSY, "ibv_destroy_cq: %s (a QP still uses it)", engine::to_string(r.error()));
  {
    std::lock_guard lock(dev->mu);
    dev->armed.erase(q);
    dev->n_armed = static_cast<int>(dev->armed.size());
  }
  if (q->channel) {
    std::lock_guard lock(q->channel->mu);
    std::erase(q->channel->ready, q);
    --q->channel->ch.refcnt;
  }
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete q;
  return 0;
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  if (n <= 0) return 0;
  Cq* q = cq_of(cq);
  io::UdpDriver& drv = *device_of(cq->context)->driver;
  uint64_t act = drv.activity();
  if (act == q->empty_at) {  // nothing happened since the last empty poll
    // The app waits: receive and answer in its thread (UdpDriver::poll_progress). When
    // nothing came, give the core away (pollers spin: perftest, NCCL's proxy), where there
    // are fewer cores than busy threads.
    if (!drv.poll_progress()) {
      ::sched_yield();
      return 0;
    }
    act = drv.activity();
  }
  // In chunks of 64 until n are read or the CQ is empty: a short count means empty.
  Scratch<engine::Completion, 64> chunk;  // filled by Engine::poll_cq, read up to what it gave
  engine::Completion* const buf = chunk.v;
  size_t got = 0;
  for (;;) {
    const size_t want = std::min<size_t>(static_cast<size_t>(n) - got, 64);
    const size_t k =
        drv.peek_engine([&](engine::Engine& e) { return e.poll_cq(q->id, std::span(buf, want)); });
    for (size_t i = 0; i < k; ++i) {
      wc[got + i] = to_wc(buf[i]);
      if (buf[i].status != engine::WcStatus::kSuccess &&
          buf[i].status != engine::WcStatus::kWrFlushErr)
        log_error("QP %u: work request failed: %s", buf[i].qpn, engine::to_string(buf[i].status));
    }
    got += k;
    if (k < want || got == static_cast<size_t>(n)) break;
  }
  if (got == 0) q->empty_at = act;
  return static_cast<int>(got);
}

int req_notify_cq(ibv_cq* cq, int) {
  Cq* q = cq_of(cq);
  if (!q->channel) return fail(EINVAL, "ibv_req_notify_cq: the CQ has no completion channel");
  Device* dev = device_of(cq->context);
  // The app stops polling to sleep on the channel: the progress thread receives from now.
  dev->driver->poller_leaves();
  // Armed first, then checked: a completion landing in between is seen by on_progress.
  std::lock_guard lock(dev->mu);
  dev->armed.insert(q);
  if (dev->driver->peek_engine([&](engine::Engine& e) { return e.cq_depth(q->id); }) > 0) {
    dev->armed.erase(q);
    notify(q);  // completions already waiting: the app would sleep on them otherwise
  }
  dev->n_armed = static_cast<int>(dev->armed.size());
  return 0;
}

}  // namespace mrc::verbs

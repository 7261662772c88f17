// The verbs issue 25 added (UD with address handles, atomics, SRQ) between two hosts of a 4x4
// namespace fabric (4 planes x 4 spines, 1 Gbit/s shaped ports, prefix unique to the process)
// while a plane fails and comes back. Each host is a child process of the test (the verbs
// device is one per process) that enters its host's namespace, opens mrc0 on its host
// configuration and runs its side; the two exchange their QP numbers, GIDs and keys over a
// socket pair, and the test (the parent) applies each fault when the traffic asks for it, so
// the fault always lands mid-traffic. What "loses nothing" means for each:
//   UD (unreliable by verbs semantics): host 0's own T0 of plane 1 goes down. Every datagram
//     sent before the fault, every one sent once host 0's driver has seen its port lose the
//     link (Engine::ports_down), and every one sent after the repair arrives, exactly once
//     and intact. Then host 1's T0 of plane 1, with an RC QP between the hosts carrying a
//     WRITE now and then: the same, once host 1's ACKs have told host 0's engine
//     (Engine::peer_ports_down); a UD sender alone has no way to learn a far-side failure.
//     The engine diverts datagrams off a plane its shared path health holds
//     (Engine::set_ud_paths): without that, a quarter of them went into the dead plane.
//     Nothing is sent between the fault and the engine learning of it: what would be sent
//     then on the plane is lost, and nothing in UD (no acknowledgements) can get it back.
//   Atomics: 4 QPs (2 FETCH_ADD, 2 CMP_SWP) on one counter of host 1 while host 1's T0 of
//     plane 1 goes down and up. The values before the operation of every increment (each
//     FETCH_ADD, each CMP_SWP that matched) are exactly 0..n-1 and the counter ends at n: an
//     atomic run twice (a resent request not answered from the responder's saved result) or
//     lost breaks that. The fault hit traffic: some requests are resent, or host 1's ACKs
//     told host 0 its port was down (Engine::peer_ports_down) before any was lost there.
//   SRQ: 4 QPs into one SRQ of host 1 with its limit armed, host 1 posting more receives
//     each time the limit event fires; host 1's T0 of plane 1 goes down and up. Every
//     message arrives once, in order per QP, byte for byte, and the limit event fired.
//   Tag matching: the same 4 QPs into one tag-matching SRQ with a tag posted for every message
//     (800 eager messages, several packets each); through the same fault every message
//     matches its own tag, once, in order per QP, its data byte for byte in the tag's buffer.
//     Then 800 rendezvous requests the same way: each matched, its data READ by host 1 across
//     the fabric into the tag's buffer byte for byte, and a FIN with its tag back to host 0.
// Skips (saying why) where namespaces cannot be made. The fabric is removed at the end, also
// on failure; the children are waited for by their pids (killed by pid after a time limit).
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/tm_types.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mrc/common/netns.h"
#include "mrc/io/udp/udp_driver.h"
#include "mrc/verbs/verbs.h"
#include "ns_test_fabric.h"
#include "open_device.h"
#include "to_rts.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kQps = 4;

// ---- What the two children and the parent say to each other (SOCK_SEQPACKET) ------------

// Host 0 -> parent: "F" apply the fault, "R" the repair; parent -> host 0: "f", "r" once
// applied. Either child -> parent, last: "OK <figures>" or "FAIL <why>".
bool say(int fd, const std::string& m) {
  return ::send(fd, m.data(), m.size(), 0) == ssize_t(m.size());
}
std::optional<std::string> hear(int fd, std::chrono::milliseconds limit) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(limit.count())) != 1) return std::nullopt;
  char buf[4096];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

// What one host tells the other: its GID, QP numbers and the memory the other may use.
struct Info {
  ibv_gid gid{};
  uint32_t qpn[kQps] = {};
  uint64_t addr = 0;
  uint32_t rkey = 0;
};
bool send_info(int fd, const Info& i) { return ::send(fd, &i, sizeof i, 0) == sizeof i; }
bool recv_info(int fd, Info* i) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 20000) == 1 && ::recv(fd, i, sizeof *i, 0) == sizeof *i;
}

// ---- One host's verbs objects ------------------------------------------------------------

struct Host {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  std::vector<uint8_t> buf;
  ibv_mr* mr = nullptr;
  std::string error;  // the first failure

  bool open(size_t bytes, unsigned access) {
    ctx = testing::open_the_device();
    if (!ctx) return fail("no mrc0 (MRC_CONFIG " + std::string(std::getenv("MRC_CONFIG")) + ")");
    pd = alloc_pd(ctx);
    cq = create_cq(ctx, 4096, nullptr, nullptr, 0);
    buf.assign(bytes, 0);
    mr = reg_mr(pd, buf.data(), buf.size(), reinterpret_cast<uintptr_t>(buf.data()),
                IBV_ACCESS_LOCAL_WRITE | access);
    return pd && cq && mr ? true : fail("pd, cq or mr not made");
  }
  bool fail(const std::string& why) {
    if (error.empty()) error = why;
    return false;
  }
  uint64_t at(size_t off) const { return reinterpret_cast<uintptr_t>(buf.data()) + off; }
  ibv_gid gid() const {
    ibv_gid g{};
    (void)query_gid(ctx, 1, 0, &g);
    return g;
  }
  // The engine's view, under the driver's lock.
  template <class F>
  auto engine(F&& f) {
    return device_of(ctx)->driver->with_engine(std::forward<F>(f));
  }
  uint16_t ports_down() {
    return engine([](engine::Engine& e) { return e.ports_down(); });
  }
  // A QpStats counter summed over `qps`.
  uint64_t qp_sum(const std::vector<ibv_qp*>& qps, uint64_t engine::QpStats::*field) {
    return engine([&](engine::Engine& e) {
      uint64_t n = 0;
      for (ibv_qp* q : qps)
        if (const engine::QpStats* s = e.qp_stats(q->qp_num)) n += s->*field;
      return n;
    });
  }
  // The completions there are (up to `max`) once there is one, waiting up to `limit` for it;
  // a failed one is an error.
  std::vector<ibv_wc> poll(size_t max, std::chrono::milliseconds limit) {
    std::vector<ibv_wc> out;
    const auto end = Clock::now() + limit;
    ibv_wc wc[64];
    while (out.size() < max) {
      const int n = poll_cq(cq, static_cast<int>(std::min<size_t>(64, max - out.size())), wc);
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS)
          fail("completion wr_id " + std::to_string(wc[i].wr_id) + ": status " +
               std::to_string(wc[i].status));
        out.push_back(wc[i]);
      }
      if (n > 0) continue;
      if (!out.empty() || Clock::now() >= end) break;
      std::this_thread::sleep_for(50us);
    }
    return out;
  }

  // A signalled SEND of [addr, addr + len) of buf on `q`; false if the post fails.
  bool send(ibv_qp* q, uint64_t addr, uint32_t len, uint64_t wr_id) {
    ibv_sge s{addr, len, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    return post_send(q, &wr, &bad) == 0;
  }

  ibv_qp* rc_qp(ibv_srq* srq = nullptr) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.srq = srq;
    a.cap.max_send_wr = a.cap.max_recv_wr = 64;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    ibv_qp* q = create_qp(pd, &a);
    if (!q) return fail("ibv_create_qp: " + std::string(std::strerror(errno))), nullptr;
    ibv_qp_attr i{};
    i.qp_state = IBV_QPS_INIT;
    i.port_num = 1;
    i.qp_access_flags =  // READ: a tag-matching receiver fetches a rendezvous
        IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ;
    if (modify_qp(q, &i, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return fail("RC QP to INIT"), nullptr;
    return q;
  }
  // RTR toward QP `dest` of the host with GID `dgid`, then RTS, as perftest does; retries
  // without end (7), so that a plane failure never ends the QP.
  bool connect(ibv_qp* q, const ibv_gid& dgid, uint32_t dest) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = dest;
    a.rq_psn = 0x10;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = dgid;
    a.ah_attr.grh.hop_limit = 64;
    if (modify_qp(q, &a,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return fail("RC QP to RTR");
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = 14;
    s.retry_cnt = 7;
    s.rnr_retry = 7;
    s.sq_psn = 0x10;
    s.max_rd_atomic = 16;
    if (modify_qp(q, &s,
                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
      return fail("RC QP to RTS");
    return true;
  }
  // kQps RC QPs (on `srq`, if given), their numbers swapped with the other host's over
  // `peer` (with `me`'s other fields), connected one to one, and both sides ready ("go").
  std::vector<ibv_qp*> rc_pairs(int peer, Info me, Info* them, ibv_srq* srq = nullptr) {
    std::vector<ibv_qp*> qps;
    me.gid = gid();
    for (int i = 0; i < kQps; ++i) {
      ibv_qp* q = rc_qp(srq);
      if (!q) return {};
      qps.push_back(q);
      me.qpn[i] = q->qp_num;
    }
    if (!send_info(peer, me) || !recv_info(peer, them)) return fail("no info from the peer"), qps;
    for (int i = 0; i < kQps; ++i)
      if (!connect(qps[i], them->gid, them->qpn[i])) return qps;
    if (!say(peer, "go") || hear(peer, 20s) != "go") fail("the peer is not ready");
    return qps;
  }
};

// Host 0's side of the fault: asks the parent for it ("F"/"R") and waits until applied.
bool fault(int ctl, bool repair) {
  if (!say(ctl, repair ? "R" : "F")) return false;
  const auto r = hear(ctl, 30s);
  return r && *r == (repair ? "r" : "f");
}

// Waits until host `h`'s driver says its ports down are `want` (the link watch), up to 5 s.
bool wait_ports_down(Host& h, uint16_t want) {
  const auto end = Clock::now() + 5s;
  while (Clock::now() < end) {
    if (h.ports_down() == want) return true;
    std::this_thread::sleep_for(5ms);
  }
  return h.fail("the driver never saw ports down = " + std::to_string(want) + " (it says " +
                std::to_string(h.ports_down()) + ")");
}

// ---- UD ----------------------------------------------------------------------------------

constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kGrh = 40;
constexpr uint32_t kDgram = 1024;  // data bytes per datagram
constexpr uint32_t kRound = 32;    // datagrams per round, sent then all waited for
constexpr uint32_t kRounds = 8;    // per phase: before, plane down, after

// The multicast group of the Mcast test (an IPv6 multicast GID).
const ibv_gid kGroup = {.raw = {0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x6d, 1}};

uint8_t ud_byte(uint32_t seq, uint32_t i) { return static_cast<uint8_t>(seq * 131 + i * 7 + 1); }

ibv_qp* ud_qp(Host& h) {
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = h.cq;
  a.qp_type = IBV_QPT_UD;
  a.cap.max_send_wr = a.cap.max_recv_wr = 2 * kRound;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  ibv_qp* q = create_qp(h.pd, &a);
  if (!q) return nullptr;
  return testing::ud_to_rts(q, kQkey) ? nullptr : q;
}

// Host 0: rounds of kRound datagrams to host 1; after each, host 1 says how many of the
// round arrived intact ("lost" counts the rest). Phases: before the fault, with a T0 of plane
// 1 down, after the repair. `far` false: host 0's own T0, each phase once host 0's driver saw
// its port go (come back). `far` true: host 1's T0; host 0 hears of it only from host 1's
// ACKs (wire ports_down), so an RC QP to host 1 carries a WRITE now and then, and each phase
// starts once host 0's engine holds (no longer holds) the plane for host 1 from what they said.
// `mcast`: the datagrams go to a multicast group host 1's QP is attached to (QPN 0xFFFFFF).
std::string ud_sender(int peer, int ctl, bool far, bool mcast = false) {
  Host h;
  if (!h.open(kRound * kDgram, 0)) return h.error;
  ibv_qp* qp = ud_qp(h);
  if (!qp) return "UD QP not made";
  Info me{h.gid(), {qp->qp_num}}, them;
  if (!send_info(peer, me) || !recv_info(peer, &them)) return "no info from host 1";
  Info rc_them;
  const std::vector<ibv_qp*> rc = far ? h.rc_pairs(peer, Info{}, &rc_them) : std::vector<ibv_qp*>{};
  if (!h.error.empty()) return h.error;
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  aa.grh.dgid = mcast ? kGroup : them.gid;
  aa.grh.hop_limit = 64;
  ibv_ah* ah = create_ah(h.pd, &aa);
  if (!ah) return "ibv_create_ah failed";
  // What host 1 said of its ports (far), a WRITE at a time until it says `want`, up to 5 s.
  auto wait_peer_ports_down = [&](uint16_t want) {
    const engine::PeerId p = reinterpret_cast<Ah*>(ah)->peer;
    const auto end = Clock::now() + 5s;
    while (Clock::now() < end) {
      if (h.engine([&](engine::Engine& e) { return e.peer_ports_down(p); }) == want) return true;
      ibv_sge s{h.at(0), 8, h.mr->lkey};
      ibv_send_wr wr{};
      wr.sg_list = &s;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = rc_them.addr;
      wr.wr.rdma.rkey = rc_them.rkey;
      ibv_send_wr* bad = nullptr;
      if (post_send(rc[0], &wr, &bad) || h.poll(1, 5s).size() != 1) break;
      std::this_thread::sleep_for(5ms);
    }
    return h.fail("host 1's ACKs never said its ports down = " + std::to_string(want));
  };
  auto wait_down = [&](uint16_t want) {
    return far ? wait_peer_ports_down(want) : wait_ports_down(h, want);
  };
  uint32_t seq = 0;
  uint32_t lost[3] = {};
  for (int phase = 0; phase < 3; ++phase) {
    if (phase == 1 && (!fault(ctl, false) || !wait_down(1u << 1)))
      return h.error.empty() ? "fault not applied" : h.error;
    if (phase == 2 && (!fault(ctl, true) || !wait_down(0)))
      return h.error.empty() ? "repair not applied" : h.error;
    for (uint32_t r = 0; r < kRounds; ++r) {
      for (uint32_t k = 0; k < kRound; ++k, ++seq) {
        uint8_t* p = h.buf.data() + k * kDgram;
        for (uint32_t i = 0; i < kDgram; ++i) p[i] = ud_byte(seq, i);
        std::memcpy(p, &seq, 4);
        ibv_sge s{h.at(k * kDgram), kDgram, h.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = seq;
        wr.sg_list = &s;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = mcast ? 0xFFFFFF : them.qpn[0];
        wr.wr.ud.remote_qkey = kQkey;
        ibv_send_wr* bad = nullptr;
        if (post_send(qp, &wr, &bad)) return "ibv_post_send (UD) failed";
        if (h.poll(1, 5s).size() != 1) return "no send completion";  // the buffer is free
      }
      if (!say(peer, "sent")) return "host 1 gone";
      const auto got = hear(peer, 20s);
      if (!got) return "host 1 did not answer a round";
      const uint32_t n = kRound - static_cast<uint32_t>(std::stoul(*got));
      lost[phase] += n;
      if (n) std::fprintf(stderr, "[ note ] UD: %u of round %u lost\n", n, phase * kRounds + r);
    }
  }
  say(peer, "end");
  const uint64_t rerouted = h.engine([](engine::Engine& e) { return e.stats().ud_rerouted; });
  char out[256];
  std::snprintf(out, sizeof out,
                "OK sent %u, lost before %u, plane down %u, after %u; rerouted %llu", seq, lost[0],
                lost[1], lost[2], static_cast<unsigned long long>(rerouted));
  destroy_ah(ah);
  destroy_qp(qp);
  for (ibv_qp* q : rc) destroy_qp(q);
  return lost[0] || lost[1] || lost[2] ? std::string("FAIL ") + (out + 3) : out;
}

// Host 1: keeps 2 rounds of receives posted; after each round (all its datagrams, or 1 s after
// host 0 said the round was out), tells host 0 how many arrived intact; a duplicate, a corrupt
// one or one of an earlier round is a failure.
std::string ud_receiver(int peer, bool far, bool mcast = false) {
  Host h;
  const uint32_t slot = kGrh + kDgram;
  // The receives, then 4 KiB for host 0's WRITEs (far).
  if (!h.open(2 * kRound * slot + 4096, IBV_ACCESS_REMOTE_WRITE)) return h.error;
  ibv_qp* qp = ud_qp(h);
  if (!qp) return "UD QP not made";
  if (mcast && attach_mcast(qp, &kGroup, 0)) return "ibv_attach_mcast failed";
  auto post = [&](uint32_t k) {
    ibv_sge s{h.at(k * slot), slot, h.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = k;
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return post_recv(qp, &wr, &bad) == 0;
  };
  for (uint32_t k = 0; k < 2 * kRound; ++k)  // before host 0 learns the QP's number
    if (!post(k)) return "ibv_post_recv (UD) failed";
  Info me{h.gid(), {qp->qp_num}}, them;
  if (!send_info(peer, me) || !recv_info(peer, &them)) return "no info from host 0";
  Info rc_me, rc_them;
  rc_me.addr = h.at(2 * kRound * slot);
  rc_me.rkey = h.mr->rkey;
  const std::vector<ibv_qp*> rc = far ? h.rc_pairs(peer, rc_me, &rc_them) : std::vector<ibv_qp*>{};
  if (!h.error.empty()) return h.error;
  std::set<uint32_t> seen;
  uint32_t next_round = 0;
  for (;;) {
    uint32_t intact = 0;
    const uint32_t lo = next_round * kRound, hi = lo + kRound;
    auto until = Clock::now() + 60s;  // until host 0 says the round is out
    bool out = false;
    while (intact < kRound && Clock::now() < until) {
      if (!out && hear(peer, 0ms) == "sent") {
        out = true;
        until = Clock::now() + 1s;
      }
      for (const ibv_wc& wc : h.poll(kRound, 20ms)) {
        const uint8_t* p = h.buf.data() + wc.wr_id * slot + kGrh;
        uint32_t seq;
        std::memcpy(&seq, p, 4);
        bool ok = wc.status == IBV_WC_SUCCESS && wc.byte_len == slot &&
                  (wc.wc_flags & IBV_WC_GRH) && wc.src_qp == them.qpn[0];
        for (uint32_t i = 4; ok && i < kDgram; ++i) ok = p[i] == ud_byte(seq, i);
        if (!ok) return "datagram corrupt (seq " + std::to_string(seq) + ")";
        if (!seen.insert(seq).second) return "datagram " + std::to_string(seq) + " twice";
        if (seq < lo || seq >= hi) return "datagram " + std::to_string(seq) + " late";
        ++intact;
        if (!post(static_cast<uint32_t>(wc.wr_id))) return "ibv_post_recv (UD) failed";
      }
      if (!h.error.empty()) return h.error;
    }
    if (!out && hear(peer, 20s) != "sent")
      return "host 0 never finished round " + std::to_string(next_round);
    if (intact < kRound) {
      const auto [rx, dropped] = h.engine([](engine::Engine& e) {
        return std::pair{e.stats().rx_datagrams, e.stats().drops_total()};
      });
      std::fprintf(stderr, "[ note ] UD round %u: %u intact, engine rx %llu dropped %llu\n",
                   next_round, intact, (unsigned long long)rx, (unsigned long long)dropped);
    }
    if (!say(peer, std::to_string(intact))) return "host 0 gone";
    ++next_round;
    if (next_round == 3 * kRounds) break;
  }
  (void)hear(peer, 20s);  // "end"
  destroy_qp(qp);
  for (ibv_qp* q : rc) destroy_qp(q);
  // What host 1's engine dropped, by reason (a lost datagram that did arrive shows here).
  std::string drops = h.engine([](engine::Engine& e) {
    std::string d;
    for (size_t i = 0; i < static_cast<size_t>(engine::Drop::kCount); ++i)
      if (const uint64_t n = e.stats().drops[i])
        d += std::string(" ") + engine::to_string(static_cast<engine::Drop>(i)) + " " +
             std::to_string(n);
    return d;
  });
  return "OK received " + std::to_string(seen.size()) +
         "; dropped:" + (drops.empty() ? " none" : drops);
}

// ---- Atomics -----------------------------------------------------------------------------

constexpr uint32_t kAtomicsPerQp = 600;  // FETCH_ADD and CMP_SWP in turn
constexpr uint32_t kOutstanding = 8;     // per QP

// Host 0: kQps QPs, each with kOutstanding atomics in flight on host 1's counter; the fault
// (host 1's T0 of plane 1) at a third of the run, the repair at two thirds.
std::string atomic_requester(int peer, int ctl) {
  Host h;
  if (!h.open(kQps * kAtomicsPerQp * 8, 0)) return h.error;
  Info them;
  const std::vector<ibv_qp*> qps = h.rc_pairs(peer, Info{}, &them);
  if (!h.error.empty()) return h.error;
  struct Op {
    bool cas = false;
    uint64_t compare = 0;
  };
  std::map<uint64_t, Op> ops;  // by wr_id = qp * kAtomicsPerQp + i (its result slot)
  uint32_t posted[kQps] = {};
  // QPs 0 and 1 FETCH_ADD 1, kOutstanding at a time; QPs 2 and 3 CMP_SWP one at a time, each
  // from the value it saw last to one more (a lock-free increment: some miss).
  auto is_cas = [](int q) { return q >= kQps / 2; };
  uint64_t seen[kQps] = {};
  auto post_one = [&](int q) {
    const uint64_t id = uint64_t(q) * kAtomicsPerQp + posted[q];
    Op op{is_cas(q), seen[q]};
    ibv_sge s{h.at(id * 8), 8, h.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = op.cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = them.addr;
    wr.wr.atomic.rkey = them.rkey;
    wr.wr.atomic.compare_add = op.cas ? op.compare : 1;
    wr.wr.atomic.swap = op.compare + 1;
    ibv_send_wr* bad = nullptr;
    if (post_send(qps[q], &wr, &bad)) return false;
    ops[id] = op;
    ++posted[q];
    return true;
  };
  for (int q = 0; q < kQps; ++q)
    for (uint32_t k = 0; k < (is_cas(q) ? 1 : kOutstanding); ++k)
      if (!post_one(q)) return "ibv_post_send (atomic) failed";
  const uint32_t total = kQps * kAtomicsPerQp;
  uint32_t completed = 0;
  bool faulted = false, repaired = false;
  std::vector<uint64_t> before;  // the value before each increment
  uint32_t cas_matched = 0, cas_missed = 0;
  // Host 1 as host 0's engine knows it, and whether its ACKs said plane 1's port was down.
  const auto attr = h.engine([&](engine::Engine& e) { return e.query_qp(qps[0]->qp_num); });
  if (!attr.ok()) return "query_qp failed";
  bool heard_down = false;
  while (completed < total) {
    if (!faulted && completed >= total / 3) faulted = fault(ctl, false);
    if (faulted && !repaired && completed >= 2 * total / 3) repaired = fault(ctl, true);
    if (faulted && !repaired && !heard_down)
      heard_down = h.engine([&](engine::Engine& e) {
        return (e.peer_ports_down(attr->peer) & 2) != 0;
      });
    const auto wcs = h.poll(64, 10s);
    if (wcs.empty())
      return "atomics stalled at " + std::to_string(completed) + " of " + std::to_string(total);
    if (!h.error.empty()) return h.error;
    for (const ibv_wc& wc : wcs) {
      uint64_t v;
      std::memcpy(&v, h.buf.data() + wc.wr_id * 8, 8);
      const Op& op = ops.at(wc.wr_id);
      const int q = static_cast<int>(wc.wr_id / kAtomicsPerQp);
      if (!op.cas || v == op.compare) {  // an increment: v was the value before it
        before.push_back(v);
        cas_matched += op.cas;
        seen[q] = v + 1;
      } else {  // a compare that failed: v is the counter's value then
        ++cas_missed;
        seen[q] = v;
      }
      ++completed;
      if (posted[q] < kAtomicsPerQp && !post_one(q)) return "ibv_post_send (atomic) failed";
    }
  }
  if (!faulted || !repaired) return "the run ended before the fault and repair were applied";
  const uint64_t resent = h.qp_sum(qps, &engine::QpStats::tx_retransmits);
  if (!say(peer, "done")) return "host 1 gone";
  const auto final = hear(peer, 20s);
  if (!final) return "no final value from host 1";
  std::sort(before.begin(), before.end());
  for (size_t i = 0; i < before.size(); ++i)
    if (before[i] != i)
      return "FAIL the values before the increments are not 0..n-1: at " + std::to_string(i) +
             " comes " + std::to_string(before[i]) +
             (i && before[i] == before[i - 1] ? " (twice)" : "");
  if (std::stoull(*final) != before.size())
    return "FAIL the counter ends at " + *final + ", increments " + std::to_string(before.size());
  // The fault hit traffic: an atomic was resent, or host 1's ACKs told host 0 of its port
  // down before anything was lost on it (host 0 waits while the fault is applied, so its
  // atomics in flight may all have completed by then: then none needs resending).
  if (resent == 0 && !heard_down)
    return "FAIL no atomic was resent and host 1's ACKs never said its port was down: the "
           "fault hit no traffic";
  for (ibv_qp* q : qps) destroy_qp(q);
  char out[200];
  std::snprintf(
      out, sizeof out,
      "OK %u atomics, %zu increments (%u CMP_SWP matched, %u missed), resent %llu%s", completed,
      before.size(), cas_matched, cas_missed, static_cast<unsigned long long>(resent),
      heard_down ? ", port down heard in ACKs" : "");
  return out;
}

// Host 1: the counter (8 bytes at offset 0) and kQps QPs; at the end, its value.
std::string atomic_responder(int peer, int) {
  Host h;
  if (!h.open(4096, IBV_ACCESS_REMOTE_ATOMIC)) return h.error;
  Info me, them;
  me.addr = h.at(0);
  me.rkey = h.mr->rkey;
  const std::vector<ibv_qp*> qps = h.rc_pairs(peer, me, &them);
  if (!h.error.empty()) return h.error;
  if (hear(peer, 120s) != "done") return "host 0 never finished";
  uint64_t v;
  std::memcpy(&v, h.buf.data(), 8);
  say(peer, std::to_string(v));
  for (ibv_qp* q : qps) destroy_qp(q);
  return "OK counter " + std::to_string(v);
}

// Host 0's loop in the SRQ and tag-matching tests: polls until `total` completions were
// counted, asking for the fault at a third of them and the repair at two thirds. `on_wc` sees
// each completion: "" counts it, "-" skips it, anything else is the failure returned. "" when
// all came and the fault and repair were both applied.
std::string run_with_fault(Host& h, int ctl, uint32_t total, const char* what,
                           const std::function<std::string(const ibv_wc&)>& on_wc) {
  uint32_t done = 0;
  bool faulted = false, repaired = false;
  while (done < total) {
    if (!faulted && done >= total / 3) faulted = fault(ctl, false);
    if (faulted && !repaired && done >= 2 * total / 3) repaired = fault(ctl, true);
    const auto wcs = h.poll(64, 10s);
    if (wcs.empty())
      return std::string(what) + " stalled at " + std::to_string(done) + " of " +
             std::to_string(total);
    if (!h.error.empty()) return h.error;
    for (const ibv_wc& wc : wcs) {
      const std::string r = on_wc(wc);
      if (r == "-") continue;
      if (!r.empty()) return r;
      ++done;
    }
  }
  return faulted && repaired ? "" : "the run ended before the fault and repair were applied";
}

// ---- SRQ ---------------------------------------------------------------------------------

constexpr uint32_t kMsgsPerQp = 400;
constexpr uint32_t kMaxMsg = 8192;
constexpr uint32_t kSrqDepth = 64, kSrqLimit = 16;

uint32_t msg_len(uint32_t q, uint32_t seq) { return 16 + (q * 977 + seq * 1531) % (kMaxMsg - 16); }
uint8_t msg_byte(uint32_t q, uint32_t seq, uint32_t i) {
  return static_cast<uint8_t>(q * 29 + seq * 13 + i * 3 + 5);
}

// Tag matching (tm_receiver): messages start with a TM header (EAGER, tag = QP index << 32 |
// message number), their (number, QP) after it; fewer of them, so that every one has a tag.
constexpr uint32_t kTmMsgsPerQp = 200;
uint32_t tm_msg_len(uint32_t q, uint32_t seq) {
  return 24 + (q * 977 + seq * 1531) % (kMaxMsg - 24);
}

// Host 0: kQps senders, kMsgsPerQp messages each (16 B..8 KiB, up to 16 in flight per QP);
// the fault (host 1's T0 of plane 1) at a third, the repair at two thirds. `tm`: tagged
// messages (kTmMsgsPerQp each, 24 B..8 KiB) for tm_receiver.
std::string srq_sender(int peer, int ctl, bool tm = false) {
  const uint32_t per_qp = tm ? kTmMsgsPerQp : kMsgsPerQp;
  Host h;
  constexpr uint32_t kWindow = 16;
  if (!h.open(size_t{kQps} * kWindow * kMaxMsg, 0)) return h.error;
  Info them;
  const std::vector<ibv_qp*> qps = h.rc_pairs(peer, Info{}, &them);
  if (!h.error.empty()) return h.error;
  uint32_t posted[kQps] = {};
  auto post_one = [&](uint32_t q) {
    const uint32_t seq = posted[q];
    const size_t off = (size_t{q} * kWindow + seq % kWindow) * kMaxMsg;
    const uint32_t len = tm ? tm_msg_len(q, seq) : msg_len(q, seq);
    uint8_t* p = h.buf.data() + off;
    for (uint32_t i = 0; i < len; ++i) p[i] = msg_byte(q, seq, i);
    const uint32_t at = tm ? sizeof(ibv_tmh) : 0;
    std::memcpy(p + at, &seq, 4);
    std::memcpy(p + at + 4, &q, 4);
    if (tm) {
      ibv_tmh th{};
      th.opcode = IBV_TMH_EAGER;
      th.tag = htobe64(uint64_t{q} << 32 | seq);
      std::memcpy(p, &th, sizeof th);
    }
    if (!h.send(qps[q], h.at(off), len, q)) return false;
    ++posted[q];
    return true;
  };
  for (uint32_t q = 0; q < kQps; ++q)
    for (uint32_t k = 0; k < kWindow; ++k)
      if (!post_one(q)) return "ibv_post_send failed";
  const std::string run = run_with_fault(h, ctl, kQps * per_qp, "sends", [&](const ibv_wc& wc) {
    const auto q = static_cast<uint32_t>(wc.wr_id);
    return posted[q] < per_qp && !post_one(q) ? "ibv_post_send failed" : "";
  });
  if (!run.empty()) return run;
  // Resends after RNR NAKs (the SRQ ran dry before the receiver posted more) count too.
  const uint64_t resent = h.qp_sum(qps, &engine::QpStats::tx_retransmits);
  const uint64_t rnr = h.qp_sum(qps, &engine::QpStats::rnr_naks);
  const auto r = hear(peer, 30s);
  for (ibv_qp* q : qps) destroy_qp(q);
  if (!r) return "no word from host 1";
  return *r + ", resent " + std::to_string(resent) + " (RNR NAKs " + std::to_string(rnr) + ")";
}

// Host 1: one SRQ under kQps QPs, kSrqDepth receives posted and the limit armed at
// kSrqLimit; each limit event posts the receives taken since and arms it again.
std::string srq_receiver(int peer, int) {
  Host h;
  if (!h.open(size_t{kSrqDepth} * kMaxMsg, 0)) return h.error;
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = kSrqDepth;
  sa.attr.max_sge = 1;
  ibv_srq* srq = create_srq(h.pd, &sa);
  if (!srq) return "ibv_create_srq failed";
  std::vector<uint32_t> free_slots;
  auto post = [&](uint32_t k) {
    ibv_sge s{h.at(size_t{k} * kMaxMsg), kMaxMsg, h.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = k;
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return post_srq_recv(srq, &wr, &bad) == 0;
  };
  auto arm = [&] {
    ibv_srq_attr a{};
    a.srq_limit = kSrqLimit;
    return modify_srq(srq, &a, IBV_SRQ_LIMIT) == 0;
  };
  for (uint32_t k = 0; k < kSrqDepth; ++k)
    if (!post(k)) return "ibv_post_srq_recv failed";
  if (!arm()) return "ibv_modify_srq (limit) failed";
  ::fcntl(h.ctx->async_fd, F_SETFL, ::fcntl(h.ctx->async_fd, F_GETFL) | O_NONBLOCK);
  Info them;
  const std::vector<ibv_qp*> qps = h.rc_pairs(peer, Info{}, &them, srq);
  if (!h.error.empty()) return h.error;
  std::map<uint32_t, uint32_t> by_qpn;  // our QP number -> the sender's index
  for (int i = 0; i < kQps; ++i) by_qpn[qps[i]->qp_num] = static_cast<uint32_t>(i);
  uint32_t next[kQps] = {}, received = 0, events = 0;
  const uint32_t total = kQps * kMsgsPerQp;
  while (received < total) {
    ibv_async_event ev{};
    while (get_async_event(h.ctx, &ev) == 0) {
      const bool limit = ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq;
      ack_async_event(&ev);
      if (!limit) return "unexpected async event " + std::to_string(ev.event_type);
      ++events;
      for (uint32_t k : free_slots)
        if (!post(k)) return "ibv_post_srq_recv failed";
      free_slots.clear();
      if (!arm()) return "ibv_modify_srq (limit) failed";
    }
    // Without the event, by our own count: 8 left (the event was due at fewer than 16).
    if (free_slots.size() >= kSrqDepth - kSrqLimit / 2) {
      for (uint32_t k : free_slots)
        if (!post(k)) return "ibv_post_srq_recv failed";
      free_slots.clear();
    }
    const auto wcs = h.poll(64, 20ms);
    if (!h.error.empty()) return h.error;
    for (const ibv_wc& wc : wcs) {
      const auto it = by_qpn.find(wc.qp_num);
      if (it == by_qpn.end()) return "a receive on QP " + std::to_string(wc.qp_num);
      const uint32_t q = it->second, seq = next[q];
      const uint8_t* p = h.buf.data() + wc.wr_id * kMaxMsg;
      uint32_t got_seq, got_q;
      std::memcpy(&got_seq, p, 4);
      std::memcpy(&got_q, p + 4, 4);
      if (got_q != q || got_seq != seq)
        return "QP " + std::to_string(q) + " expected message " + std::to_string(seq) + ", got " +
               std::to_string(got_seq) + " of sender " + std::to_string(got_q);
      if (wc.byte_len != msg_len(q, seq))
        return "message " + std::to_string(seq) + ": wrong length";
      for (uint32_t i = 8; i < wc.byte_len; ++i)
        if (p[i] != msg_byte(q, seq, i))
          return "message " + std::to_string(seq) + " of QP " + std::to_string(q) + ": byte " +
                 std::to_string(i) + " differs";
      ++next[q];
      ++received;
      free_slots.push_back(static_cast<uint32_t>(wc.wr_id));
    }
  }
  for (ibv_qp* q : qps) destroy_qp(q);
  destroy_srq(srq);
  const std::string out = "received " + std::to_string(received) + " messages, " +
                          std::to_string(events) + " limit events";
  say(peer, (events > 0 ? "OK " : "FAIL no SRQ limit event; ") + out);
  return events > 0 ? "OK " + out : "FAIL no SRQ limit event";
}

// Host 0, rendezvous: each message is a 32-byte request (TMH RNDV + RVH naming its data in
// host 0's memory, kept until host 1's FIN for it arrives) on each of kQps QPs, up to 8 in
// flight per QP; the fault at a third of the FINs, the repair at two thirds. Every FIN must
// carry the request's tag and app context, in order per QP.
std::string rndv_sender(int peer, int ctl) {
  Host h;
  constexpr uint32_t kWindow = 8;
  const size_t data = size_t{kQps} * kWindow * kMaxMsg, hdrs = size_t{kQps} * kWindow * 64;
  if (!h.open(data + 2 * hdrs, IBV_ACCESS_REMOTE_READ)) return h.error;
  Info them;
  const std::vector<ibv_qp*> qps = h.rc_pairs(peer, Info{}, &them);
  if (!h.error.empty()) return h.error;
  uint32_t posted[kQps] = {}, fins[kQps] = {};
  auto post_one = [&](uint32_t q) {
    const uint32_t seq = posted[q], slot = q * kWindow + seq % kWindow;
    uint8_t* p = h.buf.data() + size_t{slot} * kMaxMsg;
    const uint32_t len = tm_msg_len(q, seq) - sizeof(ibv_tmh);
    for (uint32_t i = 0; i < len; ++i) p[i] = msg_byte(q, seq, i + sizeof(ibv_tmh));
    std::memcpy(p, &seq, 4);
    std::memcpy(p + 4, &q, 4);
    uint8_t* r = h.buf.data() + data + size_t{slot} * 64;
    ibv_tmh th{};
    th.opcode = IBV_TMH_RNDV;
    th.app_ctx = htonl(seq);
    th.tag = htobe64(uint64_t{q} << 32 | seq);
    ibv_rvh rv{};
    rv.va = htobe64(reinterpret_cast<uintptr_t>(p));
    rv.rkey = htonl(h.mr->rkey);
    rv.len = htonl(len);
    std::memcpy(r, &th, sizeof th);
    std::memcpy(r + sizeof th, &rv, sizeof rv);
    ibv_sge fs{h.at(data + hdrs + size_t{slot} * 64), 64, h.mr->lkey};  // where its FIN lands
    ibv_recv_wr rw{};
    rw.wr_id = q;
    rw.sg_list = &fs;
    rw.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    if (post_recv(qps[q], &rw, &rbad)) return false;
    if (!h.send(qps[q], h.at(data + size_t{slot} * 64), sizeof th + sizeof rv, q)) return false;
    ++posted[q];
    return true;
  };
  for (uint32_t q = 0; q < kQps; ++q)
    for (uint32_t k = 0; k < kWindow; ++k)
      if (!post_one(q)) return "posting a rendezvous request failed";
  const std::string run =
      run_with_fault(h, ctl, kQps * kTmMsgsPerQp, "FINs", [&](const ibv_wc& wc) -> std::string {
        if (wc.opcode != IBV_WC_RECV) return "-";  // a request's own send completion
        const auto q = static_cast<uint32_t>(wc.wr_id);
        const uint32_t seq = fins[q], slot = q * kWindow + seq % kWindow;
        ibv_tmh fin{};
        std::memcpy(&fin, h.buf.data() + data + hdrs + size_t{slot} * 64, sizeof fin);
        if (wc.byte_len != sizeof fin || fin.opcode != IBV_TMH_FIN ||
            be64toh(fin.tag) != (uint64_t{q} << 32 | seq) || ntohl(fin.app_ctx) != seq)
          return "QP " + std::to_string(q) + ": a wrong FIN for request " + std::to_string(seq);
        ++fins[q];
        return posted[q] < kTmMsgsPerQp && !post_one(q) ? "posting a rendezvous request failed"
                                                        : "";
      });
  if (!run.empty()) return run;
  const uint64_t resent = h.qp_sum(qps, &engine::QpStats::tx_retransmits);
  const auto r = hear(peer, 30s);
  for (ibv_qp* q : qps) destroy_qp(q);
  if (!r) return "no word from host 1";
  return *r + ", resent " + std::to_string(resent);
}

// Host 1: one tag-matching SRQ under kQps QPs with a tag for every message posted before the
// senders start (unsignalled TAG_ADDs); every message must match its tag (TM_RECV with MATCH
// and DATA_VALID, the tag's buffer holding the data without the header), once, in order per QP.
// A few plain receives catch what does not match: any use of one fails the run.
std::string tm_receiver(int peer, int, bool rndv = false) {
  Host h;
  const size_t tagged = size_t{kQps} * kTmMsgsPerQp * kMaxMsg;
  if (!h.open(tagged + 16 * kMaxMsg, 0)) return h.error;
  ibv_srq_init_attr_ex sa{};
  sa.attr.max_wr = 16;
  sa.attr.max_sge = 1;
  sa.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
  sa.srq_type = IBV_SRQT_TM;
  sa.pd = h.pd;
  sa.cq = h.cq;
  sa.tm_cap.max_num_tags = kQps * kTmMsgsPerQp;
  sa.tm_cap.max_ops = 16;
  ibv_srq* srq = create_srq_ex(h.ctx, &sa);
  if (!srq) return "ibv_create_srq_ex (TM) failed";
  for (uint32_t k = 0; k < 16; ++k) {
    ibv_sge g{h.at(tagged + size_t{k} * kMaxMsg), kMaxMsg, h.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = UINT32_MAX;
    wr.sg_list = &g;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (post_srq_recv(srq, &wr, &bad)) return "ibv_post_srq_recv failed";
  }
  for (uint32_t q = 0; q < kQps; ++q)
    for (uint32_t seq = 0; seq < kTmMsgsPerQp; ++seq) {
      const uint32_t k = q * kTmMsgsPerQp + seq;
      ibv_sge g{h.at(size_t{k} * kMaxMsg), kMaxMsg, h.mr->lkey};
      ibv_ops_wr w{};
      w.opcode = IBV_WR_TAG_ADD;
      w.tm.add.recv_wr_id = k;
      w.tm.add.sg_list = &g;
      w.tm.add.num_sge = 1;
      w.tm.add.tag = uint64_t{q} << 32 | seq;
      w.tm.add.mask = ~0ull;
      ibv_ops_wr* bad = nullptr;
      if (post_srq_ops(srq, &w, &bad)) return "ibv_post_srq_ops (TAG_ADD) failed";
    }
  Info them;
  const std::vector<ibv_qp*> qps = h.rc_pairs(peer, Info{}, &them, srq);
  if (!h.error.empty()) return h.error;
  std::map<uint32_t, uint32_t> by_qpn;  // our QP number -> the sender's index
  for (int i = 0; i < kQps; ++i) by_qpn[qps[i]->qp_num] = static_cast<uint32_t>(i);
  uint32_t next[kQps] = {}, received = 0, matched = 0;
  const uint32_t total = kQps * kTmMsgsPerQp;
  while (received < total) {
    const auto wcs = h.poll(64, 20ms);
    if (!h.error.empty()) return h.error;
    for (const ibv_wc& wc : wcs) {
      const auto it = by_qpn.find(wc.qp_num);
      if (it == by_qpn.end()) return "a receive on QP " + std::to_string(wc.qp_num);
      // A rendezvous matches first (MATCH), its data is valid once READ (DATA_VALID).
      if (rndv && wc.opcode == IBV_WC_TM_RECV && wc.wc_flags == IBV_WC_TM_MATCH &&
          wc.wr_id != UINT32_MAX) {
        ++matched;
        continue;
      }
      const unsigned want = rndv ? IBV_WC_TM_DATA_VALID : (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID);
      if (wc.opcode != IBV_WC_TM_RECV || wc.wc_flags != want || wc.wr_id == UINT32_MAX)
        return "a message did not match its tag (opcode " + std::to_string(wc.opcode) + ", flags " +
               std::to_string(wc.wc_flags) + ")";
      const uint32_t q = it->second, seq = next[q];
      if (wc.wr_id != uint64_t{q} * kTmMsgsPerQp + seq)
        return "QP " + std::to_string(q) + " expected message " + std::to_string(seq) +
               ", got tag buffer " + std::to_string(wc.wr_id);
      const uint8_t* p = h.buf.data() + wc.wr_id * kMaxMsg;
      uint32_t got_seq, got_q;
      std::memcpy(&got_seq, p, 4);
      std::memcpy(&got_q, p + 4, 4);
      if (got_q != q || got_seq != seq) return "message " + std::to_string(seq) + ": wrong data";
      if (wc.byte_len != tm_msg_len(q, seq) - sizeof(ibv_tmh))
        return "message " + std::to_string(seq) + ": wrong length";
      for (uint32_t i = 8; i < wc.byte_len; ++i)
        if (p[i] != msg_byte(q, seq, i + sizeof(ibv_tmh)))
          return "message " + std::to_string(seq) + " of QP " + std::to_string(q) + ": byte " +
                 std::to_string(i) + " differs";
      ++next[q];
      ++received;
    }
  }
  for (ibv_qp* q : qps) destroy_qp(q);
  destroy_srq(srq);
  if (rndv && matched != total) return "FAIL " + std::to_string(matched) + " MATCH completions";
  const std::string out =
      "received " + std::to_string(received) +
      (rndv ? " rendezvous messages, all matched and read" : " tagged messages, all matched");
  say(peer, "OK " + out);
  return "OK " + out;
}

// ---- The fixture -------------------------------------------------------------------------

class NsVerbsFault : public perf::NsFabricSuite<NsVerbsFault> {
 public:
  static constexpr perf::TestFabricSpec kFabric{.tag = "mrcvf", .planes = 4, .spines = 4};

 protected:
  using Role = std::function<std::string(int peer, int ctl)>;

  // Host 0 runs `a`, host 1 `b`, each in a child process in its host's namespace; `fault` and
  // `repair` are applied when host 0 asks. Returns the two children's last words.
  static std::pair<std::string, std::string> run(const Role& a, const Role& b,
                                                 const std::string& fault,
                                                 const std::string& repair) {
    int peer[2], ctl[2][2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, peer) != 0)
      return {"socketpair", ""};
    for (auto& c : ctl)
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, c) != 0)
        return {"socketpair", ""};
    pid_t pid[2];
    for (int h = 0; h < 2; ++h) {
      pid[h] = ::fork();
      if (pid[h] == 0) {
        ::setenv("MRC_CONFIG", fab_->host_config(h).c_str(), 1);
        ::setenv("MRC_STATS", "0", 1);
        std::string out;
        if (auto s = mrc::enter_netns(fab_->host_netns(h)); !s.ok())
          out = s.error();
        else
          out = (h == 0 ? a : b)(peer[h], ctl[h][1]);
        if (out.rfind("OK", 0) != 0 && out.rfind("FAIL", 0) != 0) out = "FAIL " + out;
        say(ctl[h][1], out);
        ::_exit(0);
      }
    }
    ::close(peer[0]);
    ::close(peer[1]);
    std::string last[2];
    std::string applied_error;
    bool faulted = false;
    const auto end = Clock::now() + 90s;
    while ((last[0].empty() || last[1].empty()) && Clock::now() < end) {
      for (int h = 0; h < 2; ++h) {
        if (!last[h].empty()) continue;
        const auto m = hear(ctl[h][0], 10ms);
        if (!m) continue;
        if (*m == "F" || *m == "R") {
          auto f = nsfabric::parse_fault(*m == "F" ? fault : repair);
          auto s = f.ok() ? fab_->apply(*f) : Status<std::string>(Err(f.error()));
          if (!s.ok()) applied_error = s.error();
          faulted = *m == "F";
          say(ctl[h][0], *m == "F" ? "f" : "r");
        } else {
          last[h] = *m;
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      if (last[h].empty()) {
        ::kill(pid[h], SIGKILL);
        last[h] = "FAIL host " + std::to_string(h) + " did not finish within 90 s";
      }
      ::waitpid(pid[h], nullptr, 0);
      ::close(ctl[h][0]);
      ::close(ctl[h][1]);
    }
    if (faulted) {  // not repaired: restore the fabric for the next test
      if (auto f = nsfabric::parse_fault(repair); f.ok()) (void)fab_->apply(*f);
    }
    EXPECT_EQ(applied_error, "");
    std::printf("host 0: %s\nhost 1: %s\n", last[0].c_str(), last[1].c_str());
    return {last[0], last[1]};
  }
};

TEST_F(NsVerbsFault, Ud_SendersPortDown_NothingLostOnceTheDriverSeesIt) {
  const auto [a, b] =
      run([](int p, int c) { return ud_sender(p, c, false); },
          [](int p, int) { return ud_receiver(p, false); }, "down t0 h0 p1", "up t0 h0 p1");
  EXPECT_EQ(a.rfind("OK", 0), 0u) << a;
  EXPECT_EQ(b.rfind("OK", 0), 0u) << b;
}

// The far side: the receiver's T0 of plane 1. UD alone could not know; the RC QP to the same
// host hears it in the receiver's ACKs, and the datagrams follow what the engine then holds.
TEST_F(NsVerbsFault, Ud_ReceiversPortDown_NothingLostOnceItsAcksSaySo) {
  const auto [a, b] =
      run([](int p, int c) { return ud_sender(p, c, true); },
          [](int p, int) { return ud_receiver(p, true); }, "down t0 h1 p1", "up t0 h1 p1");
  EXPECT_EQ(a.rfind("OK", 0), 0u) << a;
  EXPECT_EQ(b.rfind("OK", 0), 0u) << b;
}

// Multicast between fabric hosts: host 1's QP is attached to a group, host 0 sends to the
// group (one datagram per member process: host 1's), through its own T0 of plane 1 failing
// and coming back. Membership is the hosts' shared directory (both namespaces, one machine).
TEST_F(NsVerbsFault, Mcast_SendersPortDown_GroupDatagramsReachTheOtherHostNothingLost) {
  const std::string dir = "/tmp/mrc-mcast-nsvf-" + std::to_string(::getpid());
  ::setenv("MRC_MCAST_DIR", dir.c_str(), 1);
  const auto [a, b] =
      run([](int p, int c) { return ud_sender(p, c, false, true); },
          [](int p, int) { return ud_receiver(p, false, true); }, "down t0 h0 p1", "up t0 h0 p1");
  ::unsetenv("MRC_MCAST_DIR");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  EXPECT_EQ(a.rfind("OK", 0), 0u) << a;
  EXPECT_EQ(b.rfind("OK", 0), 0u) << b;
}

TEST_F(NsVerbsFault, Atomics_PlaneDownAndUp_EachIncrementOnceCounterExact) {
  const auto [a, b] = run(atomic_requester, atomic_responder, "down t0 h1 p1", "up t0 h1 p1");
  EXPECT_EQ(a.rfind("OK", 0), 0u) << a;
  EXPECT_EQ(b.rfind("OK", 0), 0u) << b;
}

TEST_F(NsVerbsFault, Srq_PlaneDownAndUp_EveryMessageOnceInOrderLimitEventFires) {
  const auto [a, b] = run([](int p, int c) { return srq_sender(p, c); }, srq_receiver,
                          "down t0 h1 p1", "up t0 h1 p1");
  EXPECT_EQ(a.rfind("OK", 0), 0u) << a;
  EXPECT_EQ(b.rfind("OK", 0), 0u) << b;
}

// Tag matching through the same fault: 4 QPs into one tag-matching SRQ, 800 eager messages
// (24 B..8 KiB, several packets each, sprayed over 4 planes), each matched to its own tag.
TEST_F(NsVerbsFault, TagMatching_PlaneDownAndUp_EveryMessageMatchedOnceInOrder) {
  const auto [a, b] =
      run([](int p, int c) { return srq_sender(p, c, true); },
          [](int p, int c) { return tm_receiver(p, c); }, "down t0 h1 p1", "up t0 h1 p1");
  EXPECT_EQ(a.rfind("OK", 0), 0u) << a;
  EXPECT_EQ(b.rfind("OK", 0), 0u) << b;
}

// Rendezvous through the same fault: 800 requests, each matched to its tag, its data READ by
// host 1 into the tag's buffer across the fabric, then a FIN back to host 0.
TEST_F(NsVerbsFault, TagMatching_Rendezvous_PlaneDownAndUp_EveryReadAndFinOnce) {
  const auto [a, b] = run(
      rndv_sender, [](int p, int c) { return tm_receiver(p, c, true); }, "down t0 h1 p1",
      "up t0 h1 p1");
  EXPECT_EQ(a.rfind("OK", 0), 0u) << a;
  EXPECT_EQ(b.rfind("OK", 0), 0u) << b;
}

}  // namespace
}  // namespace mrc::verbs

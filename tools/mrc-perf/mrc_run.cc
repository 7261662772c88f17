#include "mrc_run.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <time.h>

#include "mrc/engine/paths.h"
#include "mrc/observe/publisher.h"
#include "mrc/wire/wire.h"

namespace mrc::perf {

using namespace engine;

Result<Op, std::string> parse_op(const std::string& s) {
  for (Op op : kAllOps)
    if (s == to_string(op)) return op;
  return Err("operation must be write, write_imm, send, send_imm or read, got '" + s + "'");
}

const char* to_string(Op op) {
  switch (op) {
    case Op::kWrite:
      return "write";
    case Op::kWriteImm:
      return "write_imm";
    case Op::kSend:
      return "send";
    case Op::kSendImm:
      return "send_imm";
    case Op::kRead:
      return "read";
  }
  return "?";
}

Result<TimedFault, std::string> parse_timed_fault(const std::string& text) {
  const size_t sp = text.find(' ');
  const std::string when = text.substr(0, sp);
  if (sp == std::string::npos || text.find_first_not_of(' ', sp) == std::string::npos) {
    return Err("fault '" + text + "': expected '<time> <fault>', like '5s down t0 h0 p2'");
  }
  double scale = 0;
  std::string num;
  if (when.size() > 2 && when.ends_with("ms")) {
    scale = 1e-3;
    num = when.substr(0, when.size() - 2);
  } else if (when.size() > 1 && when.ends_with("s")) {
    scale = 1;
    num = when.substr(0, when.size() - 1);
  } else {
    return Err("fault '" + text + "': time '" + when + "' needs a unit, s or ms (5s, 500ms)");
  }
  char* end = nullptr;
  const double v = std::strtod(num.c_str(), &end);
  if (num.empty() || *end != '\0' || !(v >= 0)) {
    return Err("fault '" + text + "': time '" + when + "' is not a number >= 0");
  }
  return TimedFault{v * scale, text.substr(text.find_first_not_of(' ', sp))};
}

namespace {

// VmRSS of this process, KiB (0 if /proc is not readable).
uint64_t rss_kib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %lu kB", &kib) == 1) break;
  std::fclose(f);
  return kib;
}

constexpr uint32_t kOffsets = 61;  // prime: a stale slot's pattern offset always differs
constexpr uint32_t kOffsetStep = 64;
constexpr size_t kMaxLatencySamples = 1 << 22;
constexpr size_t kMaxRoundTrips = 1 << 19;  // trace_round_trips: 48 B each, 24 MiB at most
constexpr size_t kMaxPathEvents = 1 << 16;  // recorded ones; a long soak counts the rest

// Ops whose messages complete at the sink by consuming a posted receive.
bool uses_receives(Op op) { return op == Op::kSend || op == Op::kSendImm || op == Op::kWriteImm; }
bool has_imm(Op op) { return op == Op::kSendImm || op == Op::kWriteImm; }

struct Stream;

struct Side {
  const io::UdpConfig* cfg = nullptr;
  std::unique_ptr<io::UdpDriver> drv;
  std::map<uint32_t, PeerId> peers;  // by run host
  bool initiates = false;            // posts on some stream (its EV events are recorded)
  // One CQ for every QP of the host, polled once per pass however many streams it serves;
  // a completion finds its stream and end by QP.
  CqId cq = 0;
  uint32_t streams = 0;  // stream ends here (sizes the CQ)
  // Latency runs: the driver's activity() when its CQ, and its events, were last drained.
  uint64_t cq_seen = ~0ull, events_seen = ~0ull;
  std::map<Qpn, std::pair<Stream*, int>> by_qp;
};

// Work of one QP pair in one direction. Its two ends are run hosts host[0] and host[1]; the
// indices below (init, source, sink, and those of qp, cq) are ends, 0 or 1.
struct Stream {
  Op op = Op::kWrite;
  uint32_t host[2] = {0, 1};
  int init = 0;              // end that posts (the other one is `1 - init`)
  int source = 0, sink = 1;  // where the bytes come from and go to
  Qpn qp[2] = {0, 0};
  CqId cq[2] = {0, 0};
  std::vector<uint8_t> src, dst;  // src at `source`, dst at `sink`
  uint32_t src_key = 0, dst_key = 0;
  uint64_t posted = 0, done = 0, received = 0;
  std::vector<Time> posted_at;  // per slot: when message k was posted (latency)
  uint64_t last_rx_bytes = 0;
};

class Runner {
 public:
  explicit Runner(const MrcRunSpec& spec) : spec_(spec) {}

  Result<MrcRunResult, std::string> run();

 private:
  Status<std::string> setup();
  Status<std::string> connect(Stream& s, int init, Op op);
  Side& end(const Stream& s, int i) { return side_[s.host[i]]; }
  void poll(Side& side);
  template <class F>
  bool look(Side& side, uint64_t& seen, F&& f);
  void complete(Stream& s, int i, const Completion& c);
  void post(Stream& s);
  bool post_one(Stream& s);
  void check(Stream& s, uint64_t k, const uint8_t* got);
  void drain_events(int side);
  uint64_t rx_bytes(Stream& s);
  double since_start(Time t) const { return static_cast<double>((t - start_).count()) * 1e-9; }
  uint64_t src_offset(uint64_t k) const { return (k % kOffsets) * kOffsetStep; }
  uint64_t slot(uint64_t k) const {
    return (k % (2 * spec_.outstanding)) * uint64_t{spec_.msg_bytes};
  }
  void fail(const std::string& what) {
    ++res_.errors;
    if (res_.first_error.empty()) res_.first_error = what;
  }

  const MrcRunSpec& spec_;
  std::vector<Side> side_;  // per run host
  std::deque<Stream> streams_;
  MrcRunResult res_;
  std::vector<Duration> latencies_;  // post to completion at the poster, first messages
  // trace_round_trips: the counters now, and the time `at` (0: now).
  RtSnapshot snapshot(const Stream& s, Time at = Time{0});
  RtSnapshot at_post_;                   // ...taken when the message in flight was posted
  Time start_{0};
  std::mutex mu_;  // res_.faults (fault thread)
};

Status<std::string> Runner::setup() {
  if (spec_.msg_bytes == 0) return Err(std::string("message size must be > 0"));
  if (spec_.outstanding == 0 || spec_.outstanding > 30)
    return Err(std::string("outstanding must be 1..30"));
  if (spec_.qps == 0 || spec_.qps > 64) return Err(std::string("qps must be 1..64"));
  if (spec_.trace_round_trips &&
      (!spec_.spin || spec_.qps != 1 || spec_.outstanding != 1 || spec_.bidirectional ||
       !spec_.hosts.empty()))
    return Err(std::string(
        "a round-trip trace needs a latency run with one QP, one message in flight, one "
        "direction and two hosts"));
  if (!spec_.schedule.empty() && !spec_.apply_fault)
    return Err(std::string("a fault schedule needs a fabric to apply it to"));
  const bool many = !spec_.hosts.empty();
  if (many && spec_.pairs.empty()) return Err(std::string("hosts given without pairs"));
  const size_t n = many ? spec_.hosts.size() : 2;
  side_.resize(n);
  for (size_t h = 0; h < n; ++h) {
    side_[h].cfg = many ? &spec_.hosts[h] : h == 0 ? &spec_.client : &spec_.server;
    io::UdpConfig cfg = *side_[h].cfg;
    observe::attach_publisher(cfg);  // mrcctl sees each host's device
    // A latency run's one thread polls every end and receives for them (poll_progress), and
    // holds each host's sockets across its work for the other (io::kDefaultPollerGrace at
    // least, even where a host config asked for less).
    cfg.poller_progress = cfg.poller_progress || spec_.spin;
    if (spec_.spin) cfg.poller_grace = std::max(cfg.poller_grace, io::kDefaultPollerGrace);
    auto d = io::UdpDriver::create(cfg);
    if (!d.ok()) {
      const std::string who = many ? "host " + std::to_string(h) : h == 0 ? "client" : "server";
      return Err(who + ": " + d.error());
    }
    side_[h].drv = std::move(d).value();
  }
  // How host a names host b: a fabric host id (SRv6), else b's bound plane addresses.
  auto peer = [&](uint32_t a, uint32_t b) -> Status<std::string> {
    if (side_[a].peers.contains(b)) return {};
    io::UdpDriver& me = *side_[a].drv;
    if (side_[a].cfg->path_mode == io::PathMode::kSrv6) {
      auto p = me.add_fabric_peer(side_[b].cfg->local_host);
      if (!p.ok()) return Err(p.error());
      side_[a].peers[b] = *p;
    } else {
      const io::UdpDriver& other = *side_[b].drv;
      std::vector<sockaddr_in6> addrs;
      for (size_t p = 0; p < other.planes(); ++p) addrs.push_back(other.local_address(p));
      side_[a].peers[b] = me.add_peer(addrs);
    }
    return {};
  };
  std::vector<std::pair<uint32_t, uint32_t>> pairs = spec_.pairs;
  if (!many) pairs = {{0, 1}};
  for (const auto& [a, b] : pairs) {
    if (a >= n || b >= n || a == b)
      return Err("pair (" + std::to_string(a) + ", " + std::to_string(b) +
                 "): needs two different hosts of the " + std::to_string(n));
    for (const auto& [x, y] : {std::pair{a, b}, std::pair{b, a}})
      if (auto p = peer(x, y); !p.ok()) return p;
  }
  const uint32_t dirs = spec_.bidirectional ? 2 : 1;
  for (const auto& [a, b] : pairs)
    side_[a].streams += spec_.qps * dirs, side_[b].streams += spec_.qps * dirs;
  for (Side& sd : side_) {
    // Completions a host can owe at once: per stream end, its sends in flight and twice as
    // many posted receives.
    const uint32_t depth = std::max<uint32_t>(4096, 4 * spec_.outstanding * sd.streams);
    auto cq = sd.drv->with_engine([&](Engine& e) { return e.create_cq(depth); });
    if (!cq.ok()) return Err("create_cq: " + std::string(to_string(cq.error())));
    sd.cq = *cq;
  }
  for (const auto& [a, b] : pairs) {
    for (uint32_t q = 0; q < spec_.qps; ++q) {
      for (int dir = 0; dir < (spec_.bidirectional ? 2 : 1); ++dir) {
        Stream& s = streams_.emplace_back();
        s.host[0] = a;
        s.host[1] = b;
        auto c = connect(s, dir, spec_.ops.empty() ? spec_.op : spec_.ops[q % spec_.ops.size()]);
        if (!c.ok()) return c;
        end(s, dir).initiates = true;
      }
    }
  }
  return {};
}

Status<std::string> Runner::connect(Stream& s, int init, Op op) {
  s.op = op;
  s.init = init;
  s.source = s.op == Op::kRead ? 1 - init : init;
  s.sink = 1 - s.source;
  std::mt19937_64 rng(0x5eed + streams_.size());
  s.src.resize(spec_.msg_bytes + kOffsets * kOffsetStep);
  for (auto& b : s.src) b = static_cast<uint8_t>(rng());
  s.dst.assign(2ull * spec_.outstanding * spec_.msg_bytes, 0);
  s.posted_at.assign(2ull * spec_.outstanding, Time{0});
  const uint32_t token[2] = {static_cast<uint32_t>(rng()) | 1, static_cast<uint32_t>(rng()) | 1};
  for (int i = 0; i < 2; ++i) {
    Side& sd = end(s, i);
    auto st = sd.drv->with_engine([&](Engine& e) -> Status<std::string> {
      s.cq[i] = sd.cq;
      QpInit init_attr;
      init_attr.send_cq = init_attr.recv_cq = s.cq[i];
      init_attr.local_token = token[i];
      auto qp = e.create_qp(init_attr);
      if (!qp.ok()) return Err("create_qp: " + std::string(to_string(qp.error())));
      s.qp[i] = *qp;
      sd.by_qp[*qp] = {&s, i};
      const uint32_t acc = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
      if (i == s.source) {
        auto k = e.register_mr(s.src.data(), s.src.size(), reinterpret_cast<uint64_t>(s.src.data()),
                               acc);
        if (!k.ok()) return Err("register_mr: " + std::string(to_string(k.error())));
        s.src_key = *k;
      } else {
        auto k = e.register_mr(s.dst.data(), s.dst.size(), reinterpret_cast<uint64_t>(s.dst.data()),
                               acc);
        if (!k.ok()) return Err("register_mr: " + std::string(to_string(k.error())));
        s.dst_key = *k;
      }
      return {};
    });
    if (!st.ok()) return st;
  }
  for (int i = 0; i < 2; ++i) {
    io::UdpDriver& d = *end(s, i).drv;
    // The RTR attributes every front end shares (UdpDriver::rtr_attr), then the run's own.
    QpAttr at = d.rtr_attr(end(s, i).peers.at(s.host[1 - i]), end(s, 1 - i).cfg->local_host,
                           s.qp[1 - i], token[1 - i]);
    auto mtu = d.payload_mtu(spec_.mtu);  // both ends' links must carry it
    if (!mtu.ok()) return Err(mtu.error());
    at.mtu = std::min(*mtu, end(s, 1 - i).drv->max_payload());
    at.max_psn_range = spec_.max_psn_range;
    at.path_policy.min_active_per_plane = spec_.min_active_per_plane;
    constexpr uint32_t kMask = io::UdpDriver::kRtrMask | attr::kMtu | attr::kMpr;
    auto st = d.with_engine([&](Engine& e) -> Status<std::string> {
      QpAttr init;
      init.state = QpState::kInit;
      if (auto r = e.modify_qp(s.qp[i], init, attr::kState); !r.ok())
        return Err("modify_qp INIT: " + std::string(to_string(r.error())));
      if (auto r = e.connect_qp(s.qp[i], at, kMask); !r.ok())
        return Err("connect QP (INIT -> RTR -> RTS): " + std::string(r.error().field) + ": " +
                   to_string(r.error().error));
      return {};
    });
    if (!st.ok()) return st;
  }
  if (uses_receives(s.op)) {
    for (uint64_t j = 0; j < 2ull * spec_.outstanding; ++j) {
      Sge sge{reinterpret_cast<uint64_t>(s.dst.data() + slot(j)), spec_.msg_bytes, s.dst_key};
      auto r = end(s, s.sink).drv->with_engine([&](Engine& e) {
        return e.post_recv(s.qp[s.sink], RecvWr{j, {&sge, 1}});
      });
      if (!r.ok()) return Err("post_recv: " + std::string(to_string(r.error())));
    }
  }
  return {};
}

bool Runner::post_one(Stream& s) {
  const uint64_t k = s.posted;
  SendWr wr;
  wr.wr_id = k;
  Sge sge;
  switch (s.op) {
    case Op::kWrite:
    case Op::kWriteImm:
    case Op::kSend:
    case Op::kSendImm:
      sge = {reinterpret_cast<uint64_t>(s.src.data() + src_offset(k)), spec_.msg_bytes, s.src_key};
      wr.opcode = s.op == Op::kWrite      ? Opcode::kWrite
                  : s.op == Op::kWriteImm ? Opcode::kWriteImm
                  : s.op == Op::kSend     ? Opcode::kSend
                                          : Opcode::kSendImm;
      wr.imm = static_cast<uint32_t>(k);  // checked at the sink
      wr.remote_addr = reinterpret_cast<uint64_t>(s.dst.data() + slot(k));
      wr.rkey = s.dst_key;
      break;
    case Op::kRead:
      sge = {reinterpret_cast<uint64_t>(s.dst.data() + slot(k)), spec_.msg_bytes, s.dst_key};
      wr.opcode = Opcode::kRead;
      wr.remote_addr = reinterpret_cast<uint64_t>(s.src.data() + src_offset(k));
      wr.rkey = s.src_key;
      break;
  }
  wr.sg = {&sge, 1};
  // The round trip starts before the post, as a ping-pong's starts before its send: a latency
  // run's post sends the datagram from this thread, and on veth that send carries it the whole
  // way to the peer's socket (the kernel forwards it in this thread's softirq), so stamping
  // after the post left the first half of the round trip out of the figure.
  const Time post_start = io::now();
  if (spec_.trace_round_trips) at_post_ = snapshot(s, post_start);
  // Latency runs send from this thread (as the verbs shim posts), bandwidth runs leave the
  // sending to the progress thread. Posting bandwidth runs with with_engine_flush too (no
  // wakeup per WRITE) gave 0.54-0.75x the Gbit/s of this on 4 planes x 4 spines at 2 Gbit/s,
  // 4 of 4 alternating runs (perf/RESULTS.md 2026-11-27 (bpc)): not understood yet.
  auto post_one = [&](Engine& e) { return e.post_send(s.qp[s.init], wr); };
  auto r = spec_.spin ? end(s, s.init).drv->with_engine_flush(post_one)
                      : end(s, s.init).drv->with_engine(post_one);
  if (!r.ok()) {
    fail("post_send: " + std::string(to_string(r.error())));
    return false;
  }
  s.posted_at[k % s.posted_at.size()] = post_start;
  ++s.posted;
  return true;
}

void Runner::check(Stream& s, uint64_t k, const uint8_t* got) {
  if (spec_.verify) {
    // Taking the sink's lock orders its progress thread's writes before this read (a read:
    // peek_engine, which does not wake the progress thread).
    end(s, s.sink).drv->peek_engine([](Engine&) {});
    if (std::memcmp(got, s.src.data() + src_offset(k), spec_.msg_bytes) != 0) {
      ++res_.mismatches;
      if (res_.first_error.empty())
        res_.first_error = "message " + std::to_string(k) + ": bytes differ at the destination";
      return;
    }
  }
  ++res_.messages;
  res_.bytes += spec_.msg_bytes;
}

// Latency runs (spin): runs f(engine) only when the driver's activity() moved since `seen`
// (else nothing can be new: no lock taken) and its mutex is free (else its loop or an app call
// holds it, often across a send: the next pass looks again, rather than this one thread that
// plays both ends sleeping on a futex). Other runs: peek_engine. False: f did not run.
template <class F>
bool Runner::look(Side& side, uint64_t& seen, F&& f) {
  if (!spec_.spin) {
    side.drv->peek_engine(f);
    return true;
  }
  const uint64_t a = side.drv->activity();
  if (a == seen || !side.drv->try_peek_engine(f)) return false;
  seen = a;  // read before f: what f missed moves it again
  return true;
}

void Runner::poll(Side& side) {
  Completion c[64];
  for (;;) {
    size_t n = 0;
    if (!look(side, side.cq_seen, [&](Engine& e) { n = e.poll_cq(side.cq, c); })) return;
    if (n == std::size(c)) side.cq_seen = ~0ull;  // more may wait: not drained
    for (size_t j = 0; j < n; ++j) {
      auto it = side.by_qp.find(c[j].qpn);
      if (it == side.by_qp.end()) {
        fail("completion of QP " + std::to_string(c[j].qpn) + ", which no stream owns");
        continue;
      }
      complete(*it->second.first, it->second.second, c[j]);
    }
    if (n < std::size(c)) break;
  }
}

void Runner::complete(Stream& s, int i, const Completion& c) {
  if (c.status != WcStatus::kSuccess) {
    fail(std::string("completion error: ") + to_string(c.status));
    return;
  }
  const bool recv = c.opcode == WcOpcode::kRecv || c.opcode == WcOpcode::kRecvWriteImm;
  if (i == s.init && !recv) {
    const uint64_t k = s.done++;
    if (latencies_.size() < kMaxLatencySamples)
      latencies_.push_back(io::now() - s.posted_at[k % s.posted_at.size()]);
    if (spec_.trace_round_trips && res_.round_trips.size() < kMaxRoundTrips)
      res_.round_trips.push_back(round_trip_between(at_post_, snapshot(s)));
    if (s.op == Op::kWrite) check(s, k, s.dst.data() + slot(k));
    if (s.op == Op::kRead) check(s, k, s.dst.data() + slot(k));
  } else if (i == s.sink && recv) {
    const uint64_t k = s.received++;
    if (has_imm(s.op) != c.has_imm || (c.has_imm && c.imm != static_cast<uint32_t>(k))) {
      ++res_.mismatches;
      if (res_.first_error.empty())
        res_.first_error = "message " + std::to_string(k) + ": immediate " +
                           (c.has_imm ? std::to_string(c.imm) : "missing");
    }
    check(s, k, s.dst.data() + slot(k));
    Sge sge{reinterpret_cast<uint64_t>(s.dst.data() + slot(k)), spec_.msg_bytes, s.dst_key};
    auto r = end(s, i).drv->with_engine([&](Engine& e) {
      return e.post_recv(s.qp[i], RecvWr{k + 2ull * spec_.outstanding, {&sge, 1}});
    });
    if (!r.ok()) fail("post_recv: " + std::string(to_string(r.error())));
  }
}

RtSnapshot Runner::snapshot(const Stream& s, Time at) {
  RtSnapshot r;
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  r.thread_cpu_ns = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  r.mono_ns = at.count() != 0 ? at.count() : io::now().count();
  for (int i = 0; i < 2; ++i) r.host[i] = end(s, i == 0 ? s.init : 1 - s.init).drv->counters();
  end(s, s.init).drv->peek_engine([&](Engine& e) {
    if (const QpStats* st = e.qp_stats(s.qp[s.init])) {
      r.tail_probes = st->tail_probes;
      r.rtos = st->rto_fired;
    }
  });
  return r;
}

void Runner::post(Stream& s) {
  // SEND: a slot is free again only once its receive completed and was reposted.
  const uint64_t free_limit = uses_receives(s.op) ? s.received + spec_.outstanding : UINT64_MAX;
  while (s.posted - s.done < spec_.outstanding && s.posted < free_limit) {
    if (!post_one(s)) break;
  }
}

void Runner::drain_events(int side) {
  // Only drains: peek_engine, so the loop's every pass does not wake the progress threads.
  (void)look(side_[side], side_[side].events_seen, [&](Engine& e) {
    while (auto ev = e.poll_event()) {
      if (ev->type == EventType::kCqOverflow) {
        fail("host " + std::to_string(side) + ": CQ overflow on QP " + std::to_string(ev->qpn) +
             ": a completion was lost");
        continue;
      }
      // EV state changes of the hosts that send data only (a sink's EVs carry ACKs).
      if (ev->type != EventType::kEvState || !side_[side].initiates) continue;
      if (res_.path_events.size() >= kMaxPathEvents) {
        ++res_.path_events_dropped;
        continue;
      }
      res_.path_events.push_back(PathEvent{
          since_start(ev->at), ev->ev, ev->plane, to_string(static_cast<EvState>(ev->from)),
          to_string(static_cast<EvState>(ev->to)), to_string(static_cast<EvReason>(ev->reason))});
    }
  });
}

uint64_t Runner::rx_bytes(Stream& s) {
  return end(s, s.sink).drv->peek_engine([&](Engine& e) {
    const QpStats* st = e.qp_stats(s.qp[s.sink]);
    return st ? st->rx_payload_bytes : 0;
  });
}

Result<MrcRunResult, std::string> Runner::run() {
  if (auto s = setup(); !s.ok()) return Err(s.error());
  // The run's sample records, allocated and touched before the clock starts (resize, then
  // clear: capacity and resident pages stay), so that they do not show as memory growth.
  // Path events too (at most kMaxPathEvents of 64 bytes, no strings of their own).
  auto prefault = [](auto& v, size_t n) {
    v.resize(n);
    v.clear();
  };
  prefault(res_.intervals, static_cast<size_t>(spec_.duration_s / spec_.interval_s) + 64);
  prefault(res_.rss_kib_samples, static_cast<size_t>(spec_.duration_s) + 8);
  prefault(res_.path_events, kMaxPathEvents);
  if (spec_.trace_round_trips) prefault(res_.round_trips, kMaxRoundTrips);
  for (auto& sd : side_) sd.drv->start();
  using Clock = std::chrono::steady_clock;
  const auto thread_cpu_ns = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  };
  const int64_t cpu_at_start = thread_cpu_ns();
  start_ = io::now();
  const auto t0 = Clock::now();
  auto at = [&](double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };

  std::atomic<bool> stop_faults{false};
  std::thread faults([&] {
    for (const TimedFault& f : spec_.schedule) {
      while (!stop_faults && Clock::now() < at(f.t_s))
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      // A fault due within the run is applied even when the one before took so long that the
      // run ended meanwhile (a slow nft on a loaded machine): a skipped repair would leave
      // the fabric broken. Its mark says when it really happened.
      if (stop_faults && (f.t_s > spec_.duration_s || (spec_.cancel && spec_.cancel->load())))
        return;
      const double when = std::chrono::duration<double>(Clock::now() - t0).count();
      auto r = spec_.apply_fault(f.fault);
      const double applied = std::chrono::duration<double>(Clock::now() - t0).count();
      std::lock_guard lock(mu_);
      res_.faults.push_back(FaultMark{when, f.fault, r.ok() ? "" : r.error(), applied});
    }
  });

  for (Stream& s : streams_) s.last_rx_bytes = rx_bytes(s);
  res_.rss_start_kib = res_.rss_max_kib = rss_kib();
  res_.rss_kib_samples.emplace_back(0.0, res_.rss_start_kib);
  double next = spec_.interval_s, last_sample_s = 0;
  double second_bytes = 0, next_second = 1;
  // Bytes received since the last sample, over the time since it (not since the nominal start
  // of the interval: a late sample would overlap the one before and under-report).
  res_.host_tx_bytes.assign(side_.size(), 0);
  res_.host_rx_bytes.assign(side_.size(), 0);
  auto sample = [&](double now_s) {
    uint64_t bytes = 0;
    for (Stream& s : streams_) {
      const uint64_t b = rx_bytes(s);
      bytes += b - s.last_rx_bytes;
      res_.host_tx_bytes[s.host[s.source]] += b - s.last_rx_bytes;
      res_.host_rx_bytes[s.host[s.sink]] += b - s.last_rx_bytes;
      s.last_rx_bytes = b;
    }
    const double span = now_s - last_sample_s;
    res_.intervals.push_back(Sample{now_s, bytes * 8.0 / span / 1e9, span});
    res_.sampled_bytes += bytes;
    last_sample_s = now_s;
    return bytes;
  };
  auto now_s = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  size_t next_poller = 0;  // latency runs: the host whose poll_progress comes first
  auto cancelled = [&] { return spec_.cancel != nullptr && spec_.cancel->load(); };
  while (Clock::now() < at(spec_.duration_s) && !cancelled()) {
    for (Side& sd : side_) poll(sd);
    for (Stream& s : streams_) post(s);
    for (size_t h = 0; h < side_.size(); ++h) drain_events(static_cast<int>(h));
    const double t = now_s();
    if (t >= next) {
      second_bytes += sample(t);
      next += spec_.interval_s;
      if (next <= t) next = t + spec_.interval_s;  // we stalled: skip ahead
      if (t >= next_second) {
        if (spec_.on_second) spec_.on_second(next_second, second_bytes * 8.0 / 1e9);
        const uint64_t rss = rss_kib();
        res_.rss_max_kib = std::max(res_.rss_max_kib, rss);
        res_.rss_kib_samples.emplace_back(t, rss);
        second_bytes = 0;
        next_second += 1;
      }
    }
    if (spec_.spin) {
      // Latency runs: this thread receives and answers for both ends in turn
      // (UdpDriver::poll_progress) instead of sleeping: no thread wakeup between a datagram
      // and its completion, and the progress threads step back. The hosts in turn from the one
      // after the last that received, back to the completions and posts above as soon as one
      // did: the host a post or an ACK was just sent to is polled next, the other not first
      // (polled in host order, every round trip made two empty polls, an epoll_wait each, and
      // its completion waited for the next pass).
      for (size_t k = 0; k < side_.size(); ++k) {
        const size_t h = (next_poller + k) % side_.size();
        if (side_[h].drv->poll_progress()) {
          next_poller = (h + 1) % side_.size();
          break;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  const int64_t poll_thread_cpu_ns = thread_cpu_ns() - cpu_at_start;
  // The tail since the last sample, so the samples cover the whole run.
  if (const double t = now_s(); t - last_sample_s > 1e-4) sample(t);
  res_.sampled_s = last_sample_s;
  stop_faults = true;
  faults.join();
  res_.rss_end_kib = rss_kib();
  res_.rss_max_kib = std::max(res_.rss_max_kib, res_.rss_end_kib);

  // Let what is in flight finish (and be checked), then account for it.
  const auto drain_until = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    bool busy = false;
    for (Side& sd : side_) poll(sd);
    for (Stream& s : streams_)
      busy = busy || s.done < s.posted || (uses_receives(s.op) && s.received < s.posted);
    if (!busy) break;
    if (Clock::now() > drain_until) {
      fail("in-flight messages did not complete within 10 s of the end of the run");
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  std::vector<PathStats> pst;  // one QP's path counters, reused (Engine::path_stats)
  for (Stream& s : streams_) {
    for (int i = 0; i < 2; ++i) {
      end(s, i).drv->with_engine([&](Engine& e) {
        if (const QpStats* st = e.qp_stats(s.qp[i])) {
          res_.retransmits += st->tx_retransmits;
          res_.rtos += st->rto_fired;
          res_.spurious += st->spurious_losses;
        }
        e.path_stats(s.qp[i], pst);
        for (const PathStats& p : pst) res_.trims_seen += p.trims;
        const QpStats* st = e.qp_stats(s.qp[i]);
        auto cc = e.cc_stats(s.qp[i]);
        if (i == s.source && st && res_.cc.empty()) {
          char b[256];
          std::snprintf(b, sizeof b,
                        "srtt %.0f us, min rtt %.0f us, cwnd %.0f KiB (min %.0f), %llu decreases, "
                        "%llu delay decreases, %llu quick adapts, %llu increases",
                        st->srtt_ns / 1e3, st->min_rtt_ns / 1e3, cc ? cc->cwnd / 1024.0 : 0.0,
                        cc ? cc->min_cwnd / 1024.0 : 0.0,
                        cc ? (unsigned long long)cc->decreases : 0ull,
                        cc ? (unsigned long long)cc->delay_decreases : 0ull,
                        cc ? (unsigned long long)cc->quick_adapts : 0ull,
                        cc ? (unsigned long long)cc->increases() : 0ull);
          res_.cc = b;
          // Which rule declared the losses, and which of them proved spurious (the rest:
          // tail probes, RTOs, NACKs).
          std::snprintf(b, sizeof b,
                        "; RACK losses %llu (cross-EV %llu), spurious: per-EV %llu, cross-EV "
                        "%llu, other %llu, tail probes %llu",
                        (unsigned long long)st->fast_losses, (unsigned long long)st->cross_ev_losses,
                        (unsigned long long)st->spurious_per_ev,
                        (unsigned long long)st->spurious_cross_ev,
                        (unsigned long long)(st->spurious_losses - st->spurious_per_ev -
                                             st->spurious_cross_ev),
                        (unsigned long long)st->tail_probes);
          res_.cc += b;
          const PathSet* ps = e.paths(s.qp[i]);
          for (size_t k = 0; ps && k < ps->size() && k < pst.size(); ++k) {
            const PathSet::Ev& ev = ps->ev(k);
            std::snprintf(b, sizeof b, "  ev 0x%05x plane %u  %-11s %10llu sent %8llu lost %6.0f us\n",
                          ev.path.ev, ev.path.plane, to_string(ev.state),
                          (unsigned long long)pst[k].tx_packets, (unsigned long long)pst[k].lost,
                          pst[k].rtt_ns / 1e3);
            res_.paths += b;
          }
        }
      });
    }
  }
  for (auto& sd : side_) {
    sd.drv->with_engine([&](Engine& e) {
      const engine::EngineStats& es = e.stats();
      res_.duplicates += es.dropped(Drop::kDuplicate);
      for (const wire::WireError w :
           {wire::WireError::kBadHeaderCrc, wire::WireError::kBadPayloadCrc})
        res_.crc_errors += es.malformed_by_error[static_cast<size_t>(w)];
    });
  }
  if (!latencies_.empty()) {
    std::sort(latencies_.begin(), latencies_.end());
    auto us = [&](double q) {
      const size_t i = std::min(latencies_.size() - 1, static_cast<size_t>(q * latencies_.size()));
      return static_cast<double>(latencies_[i].count()) / 1e3;
    };
    res_.latency = {latencies_.size(), us(0.5), us(0.99), us(0.999), us(1.0), poll_thread_cpu_ns};
  }
  for (auto& sd : side_) sd.drv->stop();
  // After stop: nothing is sent any more, so these are what went out (a capture compares).
  res_.client_engine = side_[0].drv->peek_engine([](Engine& e) { return e.stats(); });
  res_.server_engine = side_[1].drv->peek_engine([](Engine& e) { return e.stats(); });
  res_.client_counters = side_[0].drv->counters();
  res_.server_counters = side_[1].drv->counters();
  for (auto& sd : side_) {
    const io::UdpCounters c = sd.drv->counters();
    res_.datagrams_sent += c.datagrams_sent;
    res_.gso_messages += c.gso_messages;
  }
  return std::move(res_);
}

}  // namespace

double rss_slope_kib_per_min(std::span<const std::pair<double, uint64_t>> samples, double from_s) {
  double n = 0, st = 0, sr = 0, stt = 0, str = 0;
  for (const auto& [t, kib] : samples) {
    if (t < from_s) continue;
    const double r = static_cast<double>(kib);
    n += 1;
    st += t;
    sr += r;
    stt += t * t;
    str += t * r;
  }
  const double den = n * stt - st * st;
  if (n < 3 || den <= 0) return 0;
  return (n * str - st * sr) / den * 60.0;
}

Result<MrcRunResult, std::string> run_mrc(const MrcRunSpec& spec) {
  Runner r(spec);
  return r.run();
}

}  // namespace mrc::perf

// Two UDP drivers in one process on ::1, two planes each, progress threads running.
// Threading: the test thread talks to the drivers through with_engine / peek_engine, and
// receives in their place with poll_progress where a test says so.
#include "mrc/io/udp/udp_driver.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mrc/common/fd.h"
#include "mrc/wire/wire.h"

namespace mrc::io {
namespace {

using namespace engine;
using namespace std::chrono_literals;

constexpr auto kWaitLimit = 20s;  // every wait fails after this instead of hanging

UdpConfig loopback_config(size_t planes) {
  UdpConfig cfg;
  for (size_t i = 0; i < planes; ++i) cfg.planes.push_back(PlaneConfig{"::1", 0});
  return cfg;
}

std::unique_ptr<UdpDriver> make_driver(const UdpConfig& cfg) {
  auto r = UdpDriver::create(cfg);
  if (!r.ok()) ADD_FAILURE() << r.error();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// Two hosts, one RC QP pair between them spraying over 8 EVs spread on 2 planes (planes_).
class UdpPairBase {
 protected:
  virtual ~UdpPairBase() = default;
  virtual void tweak(UdpConfig&) {}  // a variant's configuration of both drivers
  bool start_threads_ = true;        // false: only poll_progress / step drive the drivers
  size_t planes_ = 2;

  struct Host {
    std::unique_ptr<UdpDriver> drv;
    PeerId other = 0;
    CqId cq = 0;
    Qpn qpn = 0;
  };

  void set_up() {
    for (auto& h : hosts_) {
      UdpConfig cfg = loopback_config(planes_);
      cfg.poller_progress = true;  // every pair runs with pollers able to take the sockets
      cfg.rx_placement = true;     // ...and with receive placement (off by default)
      tweak(cfg);
      h.drv = make_driver(cfg);
      ASSERT_NE(h.drv, nullptr);
      // As a completion channel: the loop's rounds wake whoever sleeps on progress_cv_.
      h.drv->set_on_progress([this] {
        std::lock_guard lock(progress_mu_);
        ++progress_rounds_;
        progress_cv_.notify_all();
      });
      auto cq = h.drv->with_engine([](Engine& e) { return e.create_cq(1u << 16); });
      ASSERT_TRUE(cq.ok());
      h.cq = *cq;
    }
    for (int i = 0; i < 2; ++i) {
      UdpDriver& remote = *hosts_[1 - i].drv;
      std::vector<sockaddr_in6> at;
      for (uint16_t p = 0; p < planes_; ++p) at.push_back(remote.local_address(p));
      hosts_[i].other = hosts_[i].drv->add_peer(at);
    }
    uint32_t token[2] = {0x1234567u, 0x7654321u};
    for (int i = 0; i < 2; ++i) {
      QpInit init;
      init.send_cq = init.recv_cq = hosts_[i].cq;
      init.local_token = token[i];
      auto q = hosts_[i].drv->with_engine([&](Engine& e) { return e.create_qp(init); });
      ASSERT_TRUE(q.ok());
      hosts_[i].qpn = *q;
    }
    std::vector<Path> paths;
    for (uint32_t ev = 0; ev < 8; ++ev)
      paths.push_back(Path{ev + 1, static_cast<uint16_t>(ev % planes_)});
    for (int i = 0; i < 2; ++i) {
      Host& h = hosts_[i];
      h.drv->with_engine([&](Engine& e) {
        QpAttr at;
        at.state = QpState::kInit;
        ASSERT_TRUE(e.modify_qp(h.qpn, at, attr::kState).ok());
        at.state = QpState::kRtr;
        at.peer = h.other;
        at.dest_qpn = hosts_[1 - i].qpn;
        at.remote_token = token[1 - i];
        at.rq_psn = 0x10000 * (1 + i);
        at.paths = paths;
        // A retry budget for sanitizer builds on two busy cores, as mrc-perf gives its QPs:
        // 7 doubling retries after the 7 linear ones (4.4 s without progress, not 118 ms).
        // TSan failed a 16 MiB WRITE here once with RETRY_EXC_ERR after 0.88 s: a driver
        // thread descheduled that long reads as loss (the engine weakness NsSoak shows).
        at.retry_cnt_exp = 7;
        ASSERT_TRUE(
            e.modify_qp(h.qpn, at,
                        attr::kState | attr::kDest | attr::kPaths | attr::kRqPsn | attr::kRetry)
                .ok());
        at.state = QpState::kRts;
        at.sq_psn = 0x10000 * (2 - i);
        ASSERT_TRUE(e.modify_qp(h.qpn, at, attr::kState | attr::kSqPsn).ok());
      });
    }
    if (start_threads_)
      for (auto& h : hosts_) h.drv->start();
  }

  void tear_down() {
    for (auto& h : hosts_) {
      if (h.drv) h.drv->stop();
    }
  }

  uint32_t reg(int host, std::vector<uint8_t>& mem) {
    auto r = hosts_[host].drv->with_engine([&](Engine& e) {
      return e.register_mr(mem.data(), mem.size(), reinterpret_cast<uint64_t>(mem.data()),
                           access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead);
    });
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : 0;
  }

  // Waits for `n` completions on a host's CQ; fails (and returns what it has) after kWaitLimit.
  // spin: as a spinning app polls (verbs poll_cq): drain, and when empty let this thread
  // receive and answer (poll_progress); else look every 200 us.
  std::vector<Completion> wait_cq(int host, size_t n, const char* what, bool spin = false) {
    std::vector<Completion> got;
    const auto until = std::chrono::steady_clock::now() + kWaitLimit;
    UdpDriver& d = *hosts_[host].drv;
    while (got.size() < n) {
      Completion c[64];
      auto drain = [&](Engine& e) { return e.poll_cq(hosts_[host].cq, std::span<Completion>(c)); };
      const size_t k = spin ? d.peek_engine(drain) : d.with_engine(drain);
      got.insert(got.end(), c, c + k);
      if (got.size() >= n || (spin && k > 0)) continue;
      if (std::chrono::steady_clock::now() > until) {
        ADD_FAILURE() << what << ": " << got.size() << " of " << n << " completions after 20 s";
        break;
      }
      if (!spin)
        std::this_thread::sleep_for(200us);
      else if (!d.poll_progress())
        std::this_thread::yield();
    }
    return got;
  }

  void post(int host, const SendWr& wr) {
    auto s =
        hosts_[host].drv->with_engine([&](Engine& e) { return e.post_send(hosts_[host].qpn, wr); });
    ASSERT_TRUE(s.ok()) << to_string(s.error());
  }
  void post_recv(int host, const RecvWr& wr) {
    auto s =
        hosts_[host].drv->with_engine([&](Engine& e) { return e.post_recv(hosts_[host].qpn, wr); });
    ASSERT_TRUE(s.ok()) << to_string(s.error());
  }

  // Test memory lives until after TearDown has stopped both progress threads: an
  // engine may still touch an MR (a retransmitted READ response) after the
  // requester's completion.
  std::vector<uint8_t>& keep(std::vector<uint8_t> v) { return buffers_.emplace_back(std::move(v)); }

  // A verified 16 MiB WRITE; returns the sender's and receiver's counters.
  std::pair<UdpCounters, UdpCounters> write_16mib() {
    auto& src = keep(pattern(16u << 20, 1));
    auto& dst = keep(std::vector<uint8_t>(src.size(), 0));
    const uint32_t lkey = reg(0, src);
    const uint32_t rkey = reg(1, dst);
    Sge sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()), lkey};
    SendWr wr;
    wr.wr_id = 7;
    wr.opcode = Opcode::kWrite;
    wr.sg = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    wr.rkey = rkey;
    post(0, wr);
    auto c = wait_cq(0, 1, "16 MiB WRITE");
    EXPECT_EQ(c.size(), 1u);
    if (!c.empty()) {
      EXPECT_EQ(c[0].wr_id, 7u);
      EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    }
    // Taking B's lock orders its progress thread's writes before our read.
    hosts_[1].drv->with_engine([](Engine&) {});
    EXPECT_TRUE(src == dst) << "16 MiB WRITE: destination differs";
    return {hosts_[0].drv->counters(), hosts_[1].drv->counters()};
  }

  // A WRITE of `local` into `remote` (a READ: of `remote` into `local`), both registered.
  SendWr rdma_wr(Opcode op, uint64_t id, std::vector<uint8_t>& local, uint32_t lkey,
                 std::vector<uint8_t>& remote, uint32_t rkey, Sge& sge) {
    sge = Sge{reinterpret_cast<uint64_t>(local.data()), static_cast<uint32_t>(local.size()), lkey};
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = op;
    wr.sg = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(remote.data());
    wr.rkey = rkey;
    return wr;
  }

  // After a WRITE, once both engines are idle with no timer, no progress thread of either
  // driver wakes (loop_iterations stays flat), and stop() returns promptly.
  void idle_threads_sleep() {
    // Some traffic first, then wait for both engines to settle.
    auto& src = keep(pattern(1 << 20, 5));
    auto& dst = keep(std::vector<uint8_t>(src.size(), 0));
    const uint32_t lkey = reg(0, src);
    const uint32_t rkey = reg(1, dst);
    Sge sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()), lkey};
    SendWr wr;
    wr.opcode = Opcode::kWrite;
    wr.sg = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    wr.rkey = rkey;
    post(0, wr);
    ASSERT_EQ(wait_cq(0, 1, "WRITE").size(), 1u);

    ASSERT_TRUE(wait_engines_idle()) << "engines never went idle";
    std::this_thread::sleep_for(20ms);  // let the wakeups our polling caused run out
    uint64_t before[2], after[2];
    for (int i = 0; i < 2; ++i) before[i] = hosts_[i].drv->counters().loop_iterations;
    std::this_thread::sleep_for(200ms);
    for (int i = 0; i < 2; ++i) after[i] = hosts_[i].drv->counters().loop_iterations;
    for (int i = 0; i < 2; ++i) {
      EXPECT_LE(after[i] - before[i], 5u) << "host " << i << " loop spun while idle";
    }

    const auto t0 = std::chrono::steady_clock::now();
    for (auto& h : hosts_) h.drv->stop();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "stop() did not return promptly";
  }

  // True once both engines are idle with no timer (polled every 10 ms; each poll is an app
  // call, which wakes the loops); false after kWaitLimit.
  bool wait_engines_idle() {
    const auto until = std::chrono::steady_clock::now() + kWaitLimit;
    for (;;) {
      bool idle = true;
      for (auto& h : hosts_)
        idle = idle && h.drv->with_engine(
                           [](Engine& e) { return e.idle() && e.next_deadline() == kNever; });
      if (idle) return true;
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(10ms);
    }
  }

  // An app that polled for a while (its driver's progress thread has stepped back) and stops.
  void poll_then_stop(int host) {
    const auto until = std::chrono::steady_clock::now() + 5ms;
    while (std::chrono::steady_clock::now() < until) (void)hosts_[host].drv->poll_progress();
  }

  std::deque<std::vector<uint8_t>> buffers_;
  Host hosts_[2];
  std::mutex progress_mu_;
  std::condition_variable progress_cv_;
  uint64_t progress_rounds_ = 0;  // under progress_mu_
};

// An app spinning on memory, as ib_write_lat waits for the peer's WRITE: a plain read of
// memory the driver writes, with no call into the driver (not instrumented: a NIC's DMA).
__attribute__((no_sanitize("thread"))) bool byte_is(const std::vector<uint8_t>& v, size_t i,
                                                    uint8_t want) {
  return *static_cast<const volatile uint8_t*>(v.data() + i) == want;
}

class UdpPair : public UdpPairBase, public ::testing::Test {
 protected:
  void SetUp() override { set_up(); }
  void TearDown() override { tear_down(); }
};

// The same transfer under each socket-level variant of the datapath.
enum class Variant {
  kNoGsoGro,
  kZeroChecksum,
  kEcmp,
  kBusyPoll,
  kIpv4Ecmp,
  kIpv4ZeroChecksum,
  kSpin,
  kNoSpin
};
class UdpPairVariant : public UdpPairBase, public ::testing::TestWithParam<Variant> {
 protected:
  void tweak(UdpConfig& c) override {
    switch (GetParam()) {
      case Variant::kNoGsoGro:
        c.gso = c.gro = false;
        break;
      case Variant::kZeroChecksum:
        c.zero_udp_checksum = true;
        break;
      case Variant::kEcmp:
        c.path_mode = PathMode::kEcmp;
        c.ecmp_source_ports = 4;
        break;
      case Variant::kBusyPoll:
        c.busy_poll = true;
        break;
      case Variant::kIpv4Ecmp:  // UDP/IPv4 through IPv4-mapped dual-stack sockets
        for (auto& p : c.planes) p.address = "::ffff:127.0.0.1";
        c.path_mode = PathMode::kEcmp;
        c.ecmp_source_ports = 4;
        break;
      case Variant::kIpv4ZeroChecksum:
        for (auto& p : c.planes) p.address = "::ffff:127.0.0.1";
        c.zero_udp_checksum = true;  // SO_NO_CHECK
        break;
      case Variant::kSpin:  // every thread polls 100 us after each round with work
        c.spin = engine::Duration{100'000};
        break;
      case Variant::kNoSpin:
        c.spin = engine::Duration{0};
        break;
    }
  }
  void SetUp() override { set_up(); }
  void TearDown() override { tear_down(); }
};

TEST_P(UdpPairVariant, Write_16MiBVerified) {
  auto [a, b] = write_16mib();
  EXPECT_GE(a.datagrams_sent, (16u << 20) / 4096);
  if (GetParam() == Variant::kSpin || GetParam() == Variant::kNoSpin) {
    EXPECT_GT(a.gso_messages, 0u);  // direct paths, GSO on
  } else if (GetParam() != Variant::kBusyPoll) {
    EXPECT_EQ(a.gso_messages > 0, GetParam() == Variant::kEcmp || GetParam() == Variant::kIpv4Ecmp);
  }
  if (GetParam() == Variant::kIpv4Ecmp) {
    EXPECT_EQ(a.gso_disabled, 0u);
    EXPECT_GT(b.gro_messages, 0u) << "GRO on IPv4 too";
  }
  if (GetParam() == Variant::kNoGsoGro) {
    EXPECT_EQ(b.gro_messages, 0u);
  }
  if (GetParam() == Variant::kNoSpin) {  // without spin no round polls without sleeping
    EXPECT_EQ(a.loop_spins, 0u);
    EXPECT_EQ(b.loop_spins, 0u);
  }
}

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  static const char* const kNames[] = {"NoGsoGro", "ZeroChecksum",     "Ecmp", "BusyPoll",
                                       "Ipv4Ecmp", "Ipv4ZeroChecksum", "Spin", "NoSpin"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Variants, UdpPairVariant,
                         ::testing::Values(Variant::kNoGsoGro, Variant::kZeroChecksum,
                                           Variant::kEcmp, Variant::kBusyPoll, Variant::kIpv4Ecmp,
                                           Variant::kIpv4ZeroChecksum, Variant::kSpin,
                                           Variant::kNoSpin),
                         variant_name);

// N progress threads (UdpConfig::progress_threads): (planes, threads asked).
class UdpPairThreads : public UdpPairBase,
                       public ::testing::TestWithParam<std::pair<size_t, uint32_t>> {
 protected:
  UdpPairThreads() { planes_ = GetParam().first; }
  void tweak(UdpConfig& c) override { c.progress_threads = GetParam().second; }
  void SetUp() override { set_up(); }
  void TearDown() override { tear_down(); }
  size_t threads() const { return std::min<size_t>(GetParam().first, GetParam().second); }
};

// Every byte arrives over the planes of every thread, and threads other than the first fed
// the engine on both sides (data on the receiver, ACKs on the sender).
TEST_P(UdpPairThreads, Write_16MiBVerifiedEveryThreadReceives) {
  for (auto& h : hosts_) EXPECT_EQ(h.drv->progress_threads(), threads());
  auto [a, b] = write_16mib();
  std::printf("%zu threads: receiver %llu of %llu loop rounds by threads 1..\n", threads(),
              (unsigned long long)b.other_thread_rounds, (unsigned long long)b.loop_iterations);
  EXPECT_EQ(a.other_thread_rounds > 0, threads() > 1);
  EXPECT_EQ(b.other_thread_rounds > 0, threads() > 1);
  EXPECT_EQ(b.recv_errors, 0u);
}

// stop() joins every thread (a hang here fails the test by its timeout), and a restarted
// driver carries a verified WRITE again.
TEST_P(UdpPairThreads, Stop_JoinsEveryThreadAndRestarts) {
  for (auto& h : hosts_) h.drv->stop();
  for (auto& h : hosts_) h.drv->stop();  // idempotent
  const uint64_t idle = hosts_[1].drv->counters().loop_iterations;
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(hosts_[1].drv->counters().loop_iterations, idle) << "a thread still runs";
  for (auto& h : hosts_) h.drv->start();
  for (auto& h : hosts_) h.drv->start();  // idempotent
  auto [a, b] = write_16mib();
  EXPECT_EQ(b.other_thread_rounds > 0, threads() > 1);
}

TEST_P(UdpPairThreads, Idle_EveryThreadSleeps) { idle_threads_sleep(); }

// Both hosts send at once, so every thread of each sends data and ACKs outside the driver's
// mutex while app posts send too (with_engine_flush): WRITE_IMMs of mixed sizes (inline ones,
// whose payload is the WQE's own buffer, up to 64 KiB ones) arrive with every byte right and
// their immediates in order, and each datagram the engine handed out is counted exactly once
// by the driver (sent, or dropped with a reason).
TEST_P(UdpPairThreads, Writes_BothWaysInOrderEveryByteCountersAgree) {
  constexpr uint32_t kCount = 280;
  constexpr uint32_t kSizes[] = {8, 100, 256, 1000, 4096, 9000, 65536};
  size_t total = 0;
  for (uint32_t i = 0; i < kCount; ++i) total += kSizes[i % 7];
  std::vector<uint8_t>* src[2];
  std::vector<uint8_t>* dst[2];
  uint32_t lkey[2], rkey[2];
  for (int h = 0; h < 2; ++h) {
    src[h] = &keep(pattern(total, 11 + h));
    dst[h] = &keep(std::vector<uint8_t>(total, 0));
    lkey[h] = reg(h, *src[h]);
    rkey[h] = reg(h, *dst[h]);
  }
  for (int h = 0; h < 2; ++h)
    for (uint32_t i = 0; i < kCount; ++i) post_recv(h, RecvWr{5000 + i, {}});
  size_t off = 0;
  for (uint32_t i = 0; i < kCount; ++i) {
    const uint32_t len = kSizes[i % 7];
    for (int h = 0; h < 2; ++h) {  // alternate the hosts: both send at once
      Sge sge{reinterpret_cast<uint64_t>(src[h]->data() + off), len, lkey[h]};
      SendWr wr;
      wr.wr_id = i;
      wr.opcode = Opcode::kWriteImm;
      wr.sg = {&sge, 1};
      wr.inline_data = len <= kMaxInline;
      wr.remote_addr = reinterpret_cast<uint64_t>(dst[1 - h]->data() + off);
      wr.rkey = rkey[1 - h];
      wr.imm = 0x100000u * static_cast<uint32_t>(h + 1) + i;
      auto st = hosts_[h].drv->with_engine_flush(
          [&](Engine& e) { return e.post_send(hosts_[h].qpn, wr); });
      ASSERT_TRUE(st.ok()) << to_string(st.error());
    }
    off += len;
  }
  for (int h = 0; h < 2; ++h) {
    auto got = wait_cq(h, 2 * kCount, "WRITE_IMMs both ways");
    ASSERT_EQ(got.size(), 2 * kCount);
    uint32_t next = 0;  // the peer's immediates, in the order it posted them
    for (const Completion& c : got) {
      EXPECT_EQ(c.status, WcStatus::kSuccess);
      if (c.opcode != WcOpcode::kRecvWriteImm) continue;
      EXPECT_EQ(c.imm, 0x100000u * static_cast<uint32_t>(2 - h) + next) << "host " << h;
      ++next;
    }
    EXPECT_EQ(next, kCount);
  }
  // Taking each driver's lock orders its threads' writes before our reads.
  for (auto& h : hosts_) h.drv->with_engine([](Engine&) {});
  EXPECT_TRUE(*src[0] == *dst[1]) << "host 0 -> 1: destination differs";
  EXPECT_TRUE(*src[1] == *dst[0]) << "host 1 -> 0: destination differs";

  // Once the engines are idle, every datagram each handed out is sent or counted dropped
  // (a refused one waits in its plane's queue until the socket has room: allow for that).
  const auto until = std::chrono::steady_clock::now() + kWaitLimit;
  const auto accounted = [](UdpDriver& d) {
    const UdpCounters c = d.counters();
    const EngineStats es = d.with_engine([](Engine& e) { return e.stats(); });
    return std::pair{c.datagrams_sent + c.send_errors + c.send_enobufs + c.no_route,
                     es.tx_datagrams};
  };
  for (int h = 0; h < 2; ++h) {
    UdpDriver& d = *hosts_[h].drv;
    while (!d.with_engine([](Engine& e) { return e.idle(); }) ||
           accounted(d).first != accounted(d).second) {
      if (std::chrono::steady_clock::now() > until) break;
      std::this_thread::sleep_for(5ms);
    }
  }
  for (auto& h : hosts_) h.drv->stop();
  for (int h = 0; h < 2; ++h) {
    UdpDriver& d = *hosts_[h].drv;
    const UdpCounters c = d.counters();
    const EngineStats es = d.with_engine([](Engine& e) { return e.stats(); });
    EXPECT_EQ(c.datagrams_sent + c.send_errors + c.send_enobufs + c.no_route, es.tx_datagrams)
        << "host " << h;
    if (c.send_errors + c.send_enobufs + c.no_route == 0) {
      EXPECT_EQ(c.bytes_sent, es.tx_bytes) << "host " << h;
    }
    EXPECT_GT(c.sendmmsg_calls, 0u);
    EXPECT_LE(c.gso_messages, c.datagrams_sent);
  }
}

std::string threads_name(const ::testing::TestParamInfo<std::pair<size_t, uint32_t>>& info) {
  return std::to_string(info.param.first) + "Planes" + std::to_string(info.param.second) +
         "Threads";
}

INSTANTIATE_TEST_SUITE_P(Threads, UdpPairThreads,
                         ::testing::Values(std::pair<size_t, uint32_t>{2, 1},
                                           std::pair<size_t, uint32_t>{2, 2},
                                           std::pair<size_t, uint32_t>{4, 4},
                                           std::pair<size_t, uint32_t>{3, 2},
                                           std::pair<size_t, uint32_t>{2, 8}),
                         threads_name);

TEST(UdpDriver, Create_ProgressThreadsAutoClampedAndBadNamed) {
  UdpConfig cfg = loopback_config(2);
  auto d = make_driver(cfg);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->progress_threads(), std::min<size_t>(2, kDefaultProgressThreads));
  cfg.progress_threads = 16;  // more than planes: one per plane
  d = make_driver(cfg);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->progress_threads(), 2u);
  cfg.progress_threads = 17;
  auto bad = UdpDriver::create(cfg);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("progress_threads must be 0..16 (0: auto), got 17"), std::string::npos)
      << bad.error();
}

TEST_F(UdpPair, Write_GsoAndGroCoalesce) {
  auto [a, b] = write_16mib();
  std::printf("sender: %llu datagrams in %llu GSO messages; receiver: %llu in %llu GRO messages\n",
              (unsigned long long)a.datagrams_sent, (unsigned long long)a.gso_messages,
              (unsigned long long)b.datagrams_received, (unsigned long long)b.gro_messages);
  EXPECT_GT(a.gso_messages, 0u);
  EXPECT_EQ(a.gso_disabled, 0u);
  EXPECT_GT(b.gro_messages, 0u);  // loopback hands GSO runs to a UDP_GRO socket whole
}

// Receive placement (UdpConfig::rx_placement): one plane, so a WRITE's packets come in PSN
// order on one socket (param: placement on or off).
class UdpPairOnePlane : public UdpPairBase, public ::testing::TestWithParam<bool> {
 protected:
  UdpPairOnePlane() { planes_ = 1; }
  void tweak(UdpConfig& c) override { c.rx_placement = GetParam(); }
  void SetUp() override { set_up(); }
  void TearDown() override { tear_down(); }
};

// Every byte arrives (write_16mib compares them); with placement on, the kernel put most
// payloads in place and the engine copied no more than the rest; off, nothing was placed.
TEST_P(UdpPairOnePlane, Write_16MiBPlacedInPlaceOrCopied) {
  auto [a, b] = write_16mib();
  const EngineStats s = hosts_[1].drv->with_engine([](Engine& e) { return e.stats(); });
  std::printf("placement %s: %llu of %llu datagrams in place in %llu placed recvmmsg, %llu B "
              "copied back out; engine: %llu B in place, %llu B copied\n",
              GetParam() ? "on" : "off", (unsigned long long)b.placed_datagrams,
              (unsigned long long)b.datagrams_received, (unsigned long long)b.placed_calls,
              (unsigned long long)b.placed_bounce_bytes,
              (unsigned long long)s.rx_write_in_place, (unsigned long long)s.rx_write_copied);
  EXPECT_EQ(s.rx_write_in_place + s.rx_write_copied, 16u << 20) << "each byte placed once";
  if (GetParam()) {
    EXPECT_GT(b.placed_calls, 0u);
    EXPECT_GT(s.rx_write_in_place, (16u << 20) / 2) << "most of the WRITE in place";
    EXPECT_GT(b.placed_datagrams, 0u);
  } else {
    EXPECT_EQ(b.placed_calls, 0u);
    EXPECT_EQ(b.placed_datagrams, 0u);
    EXPECT_EQ(s.rx_write_in_place, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Placement, UdpPairOnePlane, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "On" : "Off");
                         });

// Receive placement fed datagrams that the test writes itself (a test socket in host 0's
// place), one loop round of host 1 at a time (step(), no progress threads): the first packet of
// a WRITE is received plainly and makes the engine predict the rest; what the test sends next
// lands in those predicted places in registered memory.
class UdpPlacedCrafted : public UdpPairBase, public ::testing::Test {
 protected:
  static constexpr uint32_t kTokenB = 0x7654321;  // host 1's QP token (UdpPairBase)
  static constexpr uint32_t kPsnB = 0x20000;      // host 1's first expected PSN
  static constexpr uint32_t kP = 1000;            // payload bytes of a full packet here

  void SetUp() override {
    planes_ = 1;
    start_threads_ = false;
    set_up();
    dst_ = &keep(std::vector<uint8_t>(4 * kP, 0));
    rkey_ = reg(1, *dst_);
    fd_ = UniqueFd(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ASSERT_GE(fd_.get(), 0);
  }
  void TearDown() override { tear_down(); }

  UdpDriver& b() { return *hosts_[1].drv; }
  EngineStats stats() { return b().with_engine([](Engine& e) { return e.stats(); }); }

  // A WRITE packet to host 1's QP: PSN kPsnB + k, its payload at `offset` of a message of
  // `msg_len` bytes at dst_, no payload CRC.
  std::vector<uint8_t> write(uint32_t k, uint32_t offset, std::span<const uint8_t> payload,
                             uint32_t msg_len, bool last) {
    wire::Packet p;
    p.common.kind = wire::Kind::kWrite;
    p.common.flags = last ? wire::flag::kLast : 0;
    p.common.dst_qpn = hosts_[1].qpn;
    p.common.token = kTokenB;
    p.common.ev = 1;
    p.common.psn = kPsnB + k;
    p.data.rkey = rkey_;
    p.data.addr = reinterpret_cast<uint64_t>(dst_->data());
    p.data.offset = offset;
    p.data.payload_len = static_cast<uint32_t>(payload.size());
    p.data.msg_len = msg_len;
    std::vector<uint8_t> d(wire::kDataHeaderSize + payload.size());
    EXPECT_EQ(wire::encode_header(p, payload, d), wire::kDataHeaderSize);
    std::copy(payload.begin(), payload.end(), d.begin() + wire::kDataHeaderSize);
    return d;
  }
  // Sends `bytes` to host 1's plane 0 as one datagram, or with `segment` as one GSO message of
  // datagrams of that size (loopback hands it to host 1's UDP_GRO socket whole).
  void send(const std::vector<uint8_t>& bytes, int segment = 0) {
    ASSERT_EQ(::setsockopt(fd_.get(), IPPROTO_UDP, UDP_SEGMENT, &segment, sizeof segment), 0);
    const sockaddr_in6 at = b().local_address(0);
    ASSERT_EQ(::sendto(fd_.get(), bytes.data(), bytes.size(), 0,
                       reinterpret_cast<const sockaddr*>(&at), sizeof at),
              static_cast<ssize_t>(bytes.size()));
  }
  // One loop round of host 1 that receives (loopback delivers within sendto).
  void round() {
    const uint64_t before = b().counters().recvmmsg_calls;
    b().step(std::chrono::duration_cast<Duration>(kWaitLimit));
    ASSERT_GT(b().counters().recvmmsg_calls, before) << "the round received nothing";
  }

  std::vector<uint8_t>* dst_ = nullptr;
  uint32_t rkey_ = 0;
  UniqueFd fd_;
};

// An ACK (72 + 24 B) where a placed receive expects a WRITE's 24-byte last packet (72 + 24 B):
// it fills the slot exactly, but it is no data packet; it reaches the engine whole and is taken
// as an ACK, not dropped as malformed. The WRITE's last packet then lands as usual.
TEST_F(UdpPlacedCrafted, AckFillingAPlacedSlotIsFedWhole) {
  const std::vector<uint8_t> src = pattern(kP + 24, 3);
  const std::span<const uint8_t> all(src);
  send(write(0, 0, all.first(kP), kP + 24, false));
  ASSERT_NO_FATAL_FAILURE(round());
  wire::Packet a;
  a.common.kind = wire::Kind::kAck;
  a.common.dst_qpn = hosts_[1].qpn;
  a.common.token = kTokenB;
  a.common.ev = 1;
  a.ack.cum_psn = 0x10000;  // host 1's first send PSN: it has sent nothing, nothing acked
  a.ack.sack_base = 0x10000;
  std::vector<uint8_t> ack(wire::kDataHeaderSize + 24);
  ASSERT_EQ(wire::encode_header(a, {}, ack), ack.size());
  send(ack);
  ASSERT_NO_FATAL_FAILURE(round());
  EXPECT_GE(b().counters().placed_calls, 1u) << "the ACK was not received into the prediction";
  EXPECT_EQ(stats().dropped(Drop::kMalformed), 0u);
  const QpStats qs = b().with_engine([&](Engine& e) { return *e.qp_stats(hosts_[1].qpn); });
  EXPECT_EQ(qs.rx_acks, 1u);
  send(write(1, kP, all.subspan(kP), kP + 24, true));
  ASSERT_NO_FATAL_FAILURE(round());
  EXPECT_EQ(stats().rx_write_copied + stats().rx_write_in_place, kP + 24u);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst_->begin()));
}

// Two datagrams of another size in one GRO message, where the prediction expects PSN 1's and
// PSN 2's full packets: the first ends inside PSN 1's place, where the second's start landed,
// and its own payload goes there too. That copy must wait until the second is copied out (the
// slot it ends inside of holds unfed bytes), or the second is fed with its header overwritten.
TEST_F(UdpPlacedCrafted, MisalignedDatagramNeverCopiesOverTheNextOnesBytes) {
  const uint32_t len = 3 * kP;
  const std::vector<uint8_t> p0 = pattern(kP, 4), p1 = pattern(500, 5), p2 = pattern(500, 6);
  send(write(0, 0, p0, len, false));
  ASSERT_NO_FATAL_FAILURE(round());
  // The first: 572 B at stream 0..572 (its payload in PSN 1's place, bytes 0..500); the
  // second at 572..1144 (PSN 1's place, bytes 500..1000, then PSN 2's header slot). The
  // first's payload goes to bytes 428..928 of PSN 1's place: over the second's header.
  std::vector<uint8_t> gso = write(1, kP + 428, p1, len, false);
  const std::vector<uint8_t> second = write(2, 2 * kP, p2, len, false);
  gso.insert(gso.end(), second.begin(), second.end());
  send(gso, static_cast<int>(second.size()));
  ASSERT_NO_FATAL_FAILURE(round());
  const UdpCounters c = b().counters();
  ASSERT_GE(c.placed_calls, 1u) << "not received into the prediction";
  ASSERT_EQ(c.gro_messages, 1u) << "the two datagrams came apart: nothing to test";
  const EngineStats s = stats();
  EXPECT_EQ(s.dropped(Drop::kMalformed), 0u) << "the second was fed overwritten";
  EXPECT_EQ(s.rx_write_copied + s.rx_write_in_place, kP + 1000u);
  EXPECT_TRUE(std::equal(p0.begin(), p0.end(), dst_->begin()));
  EXPECT_TRUE(std::equal(p1.begin(), p1.end(), dst_->begin() + kP + 428));
  EXPECT_TRUE(std::equal(p2.begin(), p2.end(), dst_->begin() + 2 * kP));
}

TEST_F(UdpPair, Write_16MiBByteForByte) {
  auto [a, b] = write_16mib();
  std::printf(
      "sender: %llu datagrams in %llu sendmmsg, %llu EAGAIN, %llu ENOBUFS; receiver: %llu "
      "datagrams in %llu recvmmsg\n",
      (unsigned long long)a.datagrams_sent, (unsigned long long)a.sendmmsg_calls,
      (unsigned long long)a.send_eagain, (unsigned long long)a.send_enobufs,
      (unsigned long long)b.datagrams_received, (unsigned long long)b.recvmmsg_calls);
  EXPECT_GE(a.datagrams_sent, (16u << 20) / 4096);
  EXPECT_GT(a.sendmmsg_calls, 0u);
  EXPECT_LT(a.sendmmsg_calls, a.datagrams_sent);  // batching happened
  EXPECT_GT(b.datagrams_received, 0u);
}

TEST_F(UdpPair, SendRecv_SizesVerified) {
  const size_t sizes[] = {1, 100, 4095, 4096, 4097, 65536, 300000};
  uint32_t seed = 10;
  for (size_t n : sizes) {
    auto& src = keep(pattern(n, ++seed));
    auto& dst = keep(std::vector<uint8_t>(n + 64, 0));
    const uint32_t lkey = reg(0, src);
    const uint32_t rkey = reg(1, dst);
    Sge rs{reinterpret_cast<uint64_t>(dst.data()), static_cast<uint32_t>(dst.size()), rkey};
    post_recv(1, RecvWr{n, {&rs, 1}});
    Sge ss{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(n), lkey};
    SendWr wr;
    wr.wr_id = n;
    wr.opcode = Opcode::kSend;
    wr.sg = {&ss, 1};
    post(0, wr);
    auto rc = wait_cq(1, 1, "SEND receive");
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
    EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
    EXPECT_EQ(rc[0].byte_len, n);
    auto sc = wait_cq(0, 1, "SEND completion");
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "SEND of " << n << " bytes";
  }
}

TEST_F(UdpPair, Read_SizesVerified) {
  const size_t sizes[] = {1, 4096, 4097, 100000, 1u << 20};
  uint32_t seed = 20;
  for (size_t n : sizes) {
    auto& remote = keep(pattern(n, ++seed));
    auto& local = keep(std::vector<uint8_t>(n, 0));
    const uint32_t rkey = reg(1, remote);
    const uint32_t lkey = reg(0, local);
    Sge sge;
    post(0, rdma_wr(Opcode::kRead, n, local, lkey, remote, rkey, sge));
    auto c = wait_cq(0, 1, "READ");
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    EXPECT_EQ(c[0].opcode, WcOpcode::kRead);
    hosts_[0].drv->with_engine([](Engine&) {});
    EXPECT_TRUE(local == remote) << "READ of " << n << " bytes";
  }
}

// PORT_STATUS_UPDATE (io/udp/port_status.h): host 0 says its plane 1 is down through its QP;
// host 1's driver holds plane 1 for host 0 (Engine::peer_planes_down) and acks the update;
// "both up" clears it. A stranger's update (wrong token) and a forged ack are refused and
// counted, and change nothing.
TEST_F(UdpPair, PortStatus_PeerHoldsThePlaneAndAcks) {
  auto wait_for = [](auto done) {
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
    return done();
  };
  UdpDriver& a = *hosts_[0].drv;
  UdpDriver& b = *hosts_[1].drv;
  const PeerId a_at_b = hosts_[1].other;
  auto down_at_b = [&] {
    return b.peek_engine([&](Engine& e) { return e.peer_planes_down(a_at_b); });
  };
  std::vector<PortStatusUpdates::Ack> acks;
  auto acked = [&] {
    for (const auto& k : a.take_port_status_acks()) acks.push_back(k);
    return !acks.empty();
  };
  ASSERT_TRUE(a.send_port_status(hosts_[0].qpn, Path{1, 0}, 0b01, 7));
  ASSERT_TRUE(wait_for(acked)) << "no ack";
  EXPECT_EQ(acks[0].seq, 7u);
  EXPECT_EQ(acks[0].plane, 0u);
  EXPECT_EQ(down_at_b(), 0b10u) << "plane 1 of host 0 held at host 1";
  EXPECT_EQ(b.counters().port_status_applied, 1u);

  // A stranger: the update of another token.
  UniqueFd s(::socket(AF_INET6, SOCK_DGRAM, 0));
  ASSERT_GE(s.get(), 0);
  wire::Packet u;
  u.common.kind = wire::Kind::kPortStatus;
  u.common.token = 0xBAD;
  u.port_status.target_qpn = hosts_[1].qpn;
  u.port_status.src_qpn = hosts_[0].qpn;
  u.port_status.ports_up = 0;  // "every plane down"
  uint8_t buf[PortStatusUpdates::kSize];
  size_t n = wire::encode_header(u, {}, buf);
  const sockaddr_in6 at_b = b.local_address(0);
  ASSERT_EQ(::sendto(s.get(), buf, n, 0, reinterpret_cast<const sockaddr*>(&at_b), sizeof at_b),
            static_cast<ssize_t>(n));
  ASSERT_TRUE(wait_for([&] { return b.counters().port_status_refused == 1; }));
  EXPECT_EQ(down_at_b(), 0b10u) << "a stranger changed the hold";
  // A forged ack of an update never sent.
  u.common.kind = wire::Kind::kPortStatusAck;
  u.common.psn = 99;
  n = wire::encode_header(u, {}, buf);
  const sockaddr_in6 at_a = a.local_address(0);
  ASSERT_EQ(::sendto(s.get(), buf, n, 0, reinterpret_cast<const sockaddr*>(&at_a), sizeof at_a),
            static_cast<ssize_t>(n));
  ASSERT_TRUE(wait_for([&] { return a.counters().port_status_acks_dropped == 1; }));

  ASSERT_TRUE(a.send_port_status(hosts_[0].qpn, Path{2, 1}, 0b11, 8));  // plane 1 back up
  ASSERT_TRUE(wait_for([&] { return down_at_b() == 0; })) << "the hold stayed";
  acks.clear();
  ASSERT_TRUE(wait_for(acked));
  EXPECT_EQ(acks[0].seq, 8u);
  EXPECT_EQ(acks[0].plane, 1u) << "the ack comes back on the update's plane";
  EXPECT_FALSE(a.send_port_status(999, Path{1, 0}, 0b11, 9)) << "no such QP";
}

// A reordered down/up pair: host 0 says plane 1 is down (sequence 21), then up again (22), and
// the "up" arrives first. The late "down" is stale: host 1 acknowledges it (it arrived) but
// does not hold plane 1 again, and counts it (port_status_stale). Before the sequence was
// checked, the late "down" held the plane until the next update.
TEST_F(UdpPair, PortStatus_StaleDownAfterUpIsIgnored) {
  auto wait_for = [](auto done) {
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
    return done();
  };
  UdpDriver& a = *hosts_[0].drv;
  UdpDriver& b = *hosts_[1].drv;
  const PeerId a_at_b = hosts_[1].other;
  auto down_at_b = [&] {
    return b.peek_engine([&](Engine& e) { return e.peer_planes_down(a_at_b); });
  };
  std::vector<uint32_t> acks;  // sequences acknowledged so far
  auto acked = [&](uint32_t seq) {
    return wait_for([&] {
      for (const auto& k : a.take_port_status_acks()) acks.push_back(k.seq);
      return std::find(acks.begin(), acks.end(), seq) != acks.end();
    });
  };
  ASSERT_TRUE(a.send_port_status(hosts_[0].qpn, Path{1, 0}, 0b01, 20));  // plane 1 down
  ASSERT_TRUE(acked(20));
  EXPECT_EQ(down_at_b(), 0b10u);
  ASSERT_TRUE(a.send_port_status(hosts_[0].qpn, Path{1, 0}, 0b11, 22));  // up, sent second
  ASSERT_TRUE(acked(22));
  EXPECT_EQ(down_at_b(), 0u);
  ASSERT_TRUE(a.send_port_status(hosts_[0].qpn, Path{1, 0}, 0b01, 21));  // down, sent first
  ASSERT_TRUE(acked(21)) << "a stale update is still acknowledged";
  EXPECT_EQ(down_at_b(), 0u) << "the stale down held plane 1 again";
  const UdpCounters c = b.counters();
  EXPECT_EQ(c.port_status_stale, 1u);
  EXPECT_EQ(c.port_status_applied, 2u);
  // The driver's own numbering: consecutive ranges, later each call.
  const uint32_t first = a.port_status_seqs(2);
  EXPECT_EQ(a.port_status_seqs(1), first + 2);
}

TEST_F(UdpPair, WriteImm_200InOrder) {
  constexpr uint32_t kCount = 200;
  auto& src = keep(pattern(kCount * 64, 3));
  auto& dst = keep(std::vector<uint8_t>(src.size(), 0));
  const uint32_t lkey = reg(0, src);
  const uint32_t rkey = reg(1, dst);
  for (uint32_t i = 0; i < kCount; ++i) post_recv(1, RecvWr{1000 + i, {}});
  for (uint32_t i = 0; i < kCount; ++i) {
    Sge sge{reinterpret_cast<uint64_t>(src.data()) + i * 64, 64, lkey};
    SendWr wr;
    wr.wr_id = i;
    wr.opcode = Opcode::kWriteImm;
    wr.sg = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + i * 64;
    wr.rkey = rkey;
    wr.imm = 0xabc000 + i;
    post(0, wr);
  }
  auto rc = wait_cq(1, kCount, "WRITE_IMM receives");
  ASSERT_EQ(rc.size(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(rc[i].status, WcStatus::kSuccess);
    EXPECT_EQ(rc[i].opcode, WcOpcode::kRecvWriteImm);
    ASSERT_TRUE(rc[i].has_imm);
    EXPECT_EQ(rc[i].imm, 0xabc000 + i) << "immediate " << i << " out of order";
    EXPECT_EQ(rc[i].wr_id, 1000 + i);
  }
  auto sc = wait_cq(0, kCount, "WRITE_IMM completions");
  EXPECT_EQ(sc.size(), kCount);
  EXPECT_TRUE(src == dst);
}

TEST_F(UdpPair, Idle_ThreadSleeps) { idle_threads_sleep(); }

// UdpConfig::spin: after its rounds with work each thread polls without sleeping (rounds that
// found nothing are counted), on both sides of a WRITE; once the spin has run out with
// nothing more to do, the threads sleep: no spin and at most a stray round (an alarm a post
// armed, ringing after its ACK cancelled the deadline) in 200 ms, as without spin.
class UdpPairSpin : public UdpPair {
 protected:
  void tweak(UdpConfig& c) override {
    c.spin = engine::Duration{5'000'000};  // 5 ms: seen even by a thread often preempted
    c.progress_threads = 2;
  }
};

TEST_F(UdpPairSpin, Spin_PollsAfterWorkThenSleeps) {
  auto [a, b] = write_16mib();
  EXPECT_GT(a.loop_spins, 0u) << "the sender's threads never polled without sleeping";
  EXPECT_GT(b.loop_spins, 0u) << "the receiver's threads never polled without sleeping";
  ASSERT_TRUE(wait_engines_idle()) << "engines never went idle";
  std::this_thread::sleep_for(100ms);  // 20 spins past the last call (with_engine wakes)
  UdpCounters before[2], after[2];
  for (int i = 0; i < 2; ++i) before[i] = hosts_[i].drv->counters();
  std::this_thread::sleep_for(200ms);
  for (int i = 0; i < 2; ++i) after[i] = hosts_[i].drv->counters();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(after[i].loop_spins, before[i].loop_spins) << "host " << i << " spun while idle";
    EXPECT_LE(after[i].loop_iterations - before[i].loop_iterations, 5u)
        << "host " << i << " loop ran while idle";
  }
}

// A driver that never had work does not spin (a thread's spin starts with its first work, not
// at start()).
TEST(UdpDriver, Spin_NoneBeforeAnyWork) {
  UdpConfig cfg = loopback_config(2);
  cfg.spin = kMaxSpin;
  cfg.progress_threads = 2;
  auto d = make_driver(cfg);
  ASSERT_NE(d, nullptr);
  d->start();
  std::this_thread::sleep_for(50ms);
  const UdpCounters c = d->counters();
  EXPECT_EQ(c.loop_spins, 0u);
  EXPECT_LE(c.loop_iterations, 5u);
  d->stop();
}

// An RTS QP of `e` toward `p` (a plain socket that never answers) on `paths`, with traffic
// class `tclass` and ack timeout `timeout` (1.024 us x 2^timeout); 0 if a step failed.
Qpn unanswered_qp(Engine& e, PeerId p, std::vector<Path> paths, uint8_t tclass, uint8_t timeout) {
  const CqId cq = *e.create_cq(64);
  QpInit init;
  init.send_cq = init.recv_cq = cq;
  init.local_token = 5;
  const Qpn q = *e.create_qp(init);
  QpAttr at;
  at.state = QpState::kInit;
  if (!e.modify_qp(q, at, attr::kState).ok()) return 0;
  at.state = QpState::kRtr;
  at.peer = p;
  at.dest_qpn = 9;
  at.remote_token = 6;
  at.paths = std::move(paths);
  at.traffic_class = tclass;
  at.timeout = timeout;
  if (!e.modify_qp(q, at,
                   attr::kState | attr::kDest | attr::kPaths | attr::kTrafficClass |
                       attr::kTimeout)
           .ok())
    return 0;
  at.state = QpState::kRts;
  return e.modify_qp(q, at, attr::kState).ok() ? q : 0;
}

// One WRITE of `src` (registered as `lkey`) on QP `q`.
Status<Error> post_write_of(Engine& e, Qpn q, std::vector<uint8_t>& src, uint32_t lkey) {
  Sge sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()), lkey};
  SendWr wr;
  wr.opcode = Opcode::kWrite;
  wr.sg = {&sge, 1};
  wr.remote_addr = 0x1000;
  wr.rkey = 1;
  return e.post_send(q, wr);
}

// A QP of `d` toward `p` (unanswered_qp) and one WRITE of `src` posted on it (sent once the
// driver runs).
// flush: posted through with_engine_flush (the WRITE leaves from the caller's thread, as a
// front end's post does) instead of with_engine (the progress loop sends it).
void post_unanswered_write(UdpDriver& d, PeerId p, std::vector<Path> paths, uint8_t tclass,
                           std::vector<uint8_t>& src, uint8_t timeout = QpAttr{}.timeout,
                           bool flush = false) {
  auto post = [&](Engine& e) {
    const Qpn q = unanswered_qp(e, p, std::move(paths), tclass, timeout);
    ASSERT_NE(q, 0u);
    const uint32_t lkey =
        *e.register_mr(src.data(), src.size(), reinterpret_cast<uint64_t>(src.data()), 0);
    ASSERT_TRUE(post_write_of(e, q, src, lkey).ok());
  };
  if (flush)
    d.with_engine_flush([&](Engine& e) {
      post(e);
      return 0;
    });
  else
    d.with_engine(post);
}

// A plain UDP socket on ::1 (an ephemeral port, receives time out after 5 s) that a driver
// can send to and that never answers; its address in *addr. -1 on failure.
int plain_socket(sockaddr_in6* addr) {
  const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const timeval tv{5, 0};  // a limit, not a measurement
  *addr = sockaddr_in6{};
  addr->sin6_family = AF_INET6;
  addr->sin6_addr = in6addr_loopback;
  socklen_t len = sizeof *addr;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(addr), sizeof *addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A driver with one plane on ::1 and a plain socket that never answers (fd, its address in
// peer): for tests that watch what the driver sends and when. Null if either failed.
std::unique_ptr<UdpDriver> driver_and_silent_peer(int& fd, sockaddr_in6& peer) {
  fd = plain_socket(&peer);
  if (fd < 0) return nullptr;
  UdpConfig cfg;
  cfg.planes.push_back(PlaneConfig{"::1", 0});
  return make_driver(cfg);
}

// ECN on an IPv4 plane: a probe sent CE-marked (IPv4 TOS) is seen as CE (the answer echoes
// it), and the driver's own datagrams leave ECT(0) in the TOS byte.
// One datagram from `fd` into `rx`: its length (-1, errno set, on error or timeout), and in
// *tclass the IPv6 traffic class or IPv4 TOS it arrived with (IPV6_RECVTCLASS / IP_RECVTOS
// on), -1 if none was reported.
template <size_t N>
ssize_t recv_with_class(int fd, uint8_t (&rx)[N], int* tclass) {
  alignas(cmsghdr) uint8_t control[64];
  iovec iov{rx, N};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = control;
  h.msg_controllen = sizeof control;
  const ssize_t got = ::recvmsg(fd, &h, 0);
  *tclass = -1;
  for (cmsghdr* c = got > 0 ? CMSG_FIRSTHDR(&h) : nullptr; c; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) *tclass = *CMSG_DATA(c);
    if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)
      std::memcpy(tclass, CMSG_DATA(c), sizeof *tclass);
  }
  return got;
}

TEST(UdpDriver, Ipv4Plane_EcnBothWays) {
  UdpConfig cfg;
  cfg.planes.push_back(PlaneConfig{"::ffff:127.0.0.1", 0});
  auto d = make_driver(cfg);
  ASSERT_NE(d, nullptr);
  d->start();
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const int ce = 0x03, one = 1;
  ASSERT_EQ(::setsockopt(fd, IPPROTO_IP, IP_TOS, &ce, sizeof ce), 0);
  ASSERT_EQ(::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one), 0);
  const timeval tv{5, 0};  // a limit, not a measurement
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  wire::Packet probe;
  probe.common.kind = wire::Kind::kProbe;
  probe.common.token = 0x5151;
  probe.common.ev = 0x20100;
  probe.common.psn = 9;
  uint8_t b[wire::kMaxHeaderSize];
  const size_t n = wire::encode_header(probe, {}, b);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = d->local_address(0).sin6_port;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::sendto(fd, b, n, 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(n));
  uint8_t rx[256];
  int tos = -1;
  const ssize_t got = recv_with_class(fd, rx, &tos);
  ASSERT_GT(got, 0) << "no answer: " << std::strerror(errno);
  EXPECT_EQ(tos & 0x03, 0x02) << "the answer leaves ECT(0)";
  auto r = wire::decode(std::span<const uint8_t>(rx, static_cast<size_t>(got)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->common.kind, wire::Kind::kProbeReply);
  EXPECT_EQ(r->probe_reply.probe_flags & wire::ack_flag::kEcnEcho, wire::ack_flag::kEcnEcho)
      << "the probe's CE was seen";
  ::close(fd);
  d->stop();
}

// A QP's traffic class (verbs grh.traffic_class, rdma_cm's TOS) is on each of its datagrams,
// GSO runs included, with the ECN bits ECT(0): IPV6_TCLASS on an IPv6 plane, the IPv4 TOS on an
// IPv4 one; a probe's own class likewise. A plain socket plays the peer and reads the class
// each datagram arrived with.
TEST(UdpDriver, TrafficClass_OnEveryDatagramOfTheQp) {
  for (const bool v4 : {false, true}) {
    SCOPED_TRACE(v4 ? "IPv4 plane" : "IPv6 plane");
    UdpConfig cfg;
    cfg.planes.push_back(PlaneConfig{v4 ? "::ffff:127.0.0.1" : "::1", 0});
    auto d = make_driver(cfg);
    ASSERT_NE(d, nullptr);
    const int fd = ::socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    const int one = 1;
    ASSERT_EQ(v4 ? ::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one)
                 : ::setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one),
              0);
    const timeval tv{5, 0};  // a limit, not a measurement
    ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    sockaddr_in6 peer{};  // where the plain socket listens, as the driver names peers
    peer.sin6_family = AF_INET6;
    if (v4) {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
      socklen_t len = sizeof a;
      ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
      ASSERT_EQ(::inet_pton(AF_INET6, "::ffff:127.0.0.1", &peer.sin6_addr), 1);
      peer.sin6_port = a.sin_port;
    } else {
      peer.sin6_addr = in6addr_loopback;
      ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&peer), sizeof peer), 0);
      socklen_t len = sizeof peer;
      ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&peer), &len), 0);
    }
    const PeerId p = d->add_peer({peer});
    auto src = pattern(20000, 3);  // 5 packets: one GSO message
    post_unanswered_write(*d, p, {Path{1, 0}}, 0xb8, src);  // DSCP 46 (EF)
    d->start();
    for (int i = 0; i < 5; ++i) {
      uint8_t rx[8192];
      int tclass = -1;
      ASSERT_GT(recv_with_class(fd, rx, &tclass), 0)
          << "datagram " << i << ": " << std::strerror(errno);
      EXPECT_EQ(tclass, 0xba) << "datagram " << i << ": DSCP 46 and ECT(0)";
    }
    // A connectionless probe's own class (an OCP probe's req_tc) on its datagram, IPv4 too.
    d->with_probes([&](Probes& pr) {
      EXPECT_TRUE(pr.send(d->now(), pr.open(), p, Path{1, 0}, 7, 0x60));  // DSCP 24 (CS3)
    });
    int probe_class = -1;
    for (int i = 0; i < 100 && probe_class < 0; ++i) {  // past the QP's retransmissions
      uint8_t rx[8192];
      int tclass = -1;
      ASSERT_GT(recv_with_class(fd, rx, &tclass), 0) << std::strerror(errno);
      if (rx[1] == static_cast<uint8_t>(wire::Kind::kProbe)) probe_class = tclass;
    }
    EXPECT_EQ(probe_class, 0x62) << "the probe: DSCP 24 and ECT(0)";
    d->stop();
    ::close(fd);
  }
}

// An app call that leaves the engine's deadline as it was (a WRITE posted behind a full
// window) does not wake the sleeping loop: before, the loop's planned wakeup was a second
// clock reading plus the wait, a few ns after the deadline, so every such call found the
// deadline "earlier" and wrote the eventfd (one wakeup per WRITE posted; perf/RESULTS.md,
// faces, 2026-11-26 (fbw)).
TEST(UdpDriver, WithEngineFlush_UnchangedDeadlineLeavesLoopAsleep) {
  int fd = -1;
  sockaddr_in6 peer{};
  auto d = driver_and_silent_peer(fd, peer);
  ASSERT_NE(d, nullptr);
  auto src = pattern(4000, 9);  // one packet
  // Ack timeout 1.07 s: the RTO, the engine's only deadline, stays ahead of the calls below.
  post_unanswered_write(*d, d->add_peer({peer}), {Path{1, 0}}, 0, src, 20);
  d->start();
  uint8_t rx[8192];
  ASSERT_GT(::recv(fd, rx, sizeof rx, 0), 0) << std::strerror(errno);  // sent: the RTO is armed
  ASSERT_NE(d->with_engine([](Engine& e) { return e.next_deadline(); }), kNever);
  std::this_thread::sleep_for(20ms);  // the loop goes back to sleep until the RTO
  const uint64_t before = d->counters().loop_iterations;
  for (int i = 0; i < 100; ++i) {
    d->with_engine_flush([](Engine&) { return 0; });  // as a post that sends nothing
    std::this_thread::sleep_for(200us);  // the loop would be back asleep before the next
  }
  const uint64_t rounds = d->counters().loop_iterations - before;
  EXPECT_LE(rounds, 10u) << "the loop woke for calls that changed no deadline";
  d->stop();
  ::close(fd);
}

// app_wakeups counts the app calls that woke the loop: every with_engine, and a
// with_engine_flush only when it had to (here never: no socket full, no earlier deadline).
// mrc-perf prints it per MiB (issue 17's wakeups per byte).
TEST(UdpDriver, Counters_AppWakeupsCountOnlyCallsThatWake) {
  int fd = -1;
  sockaddr_in6 peer{};
  auto d = driver_and_silent_peer(fd, peer);
  ASSERT_NE(d, nullptr);
  auto src = pattern(4000, 9);
  post_unanswered_write(*d, d->add_peer({peer}), {Path{1, 0}}, 0, src, 20);
  d->start();
  uint8_t rx[8192];
  ASSERT_GT(::recv(fd, rx, sizeof rx, 0), 0) << std::strerror(errno);  // sent: the RTO is armed
  std::this_thread::sleep_for(20ms);
  const uint64_t before = d->counters().app_wakeups;
  for (int i = 0; i < 5; ++i) d->with_engine_flush([](Engine&) { return 0; });
  EXPECT_EQ(d->counters().app_wakeups, before);
  for (int i = 0; i < 5; ++i) d->with_engine([](Engine&) { return 0; });
  EXPECT_EQ(d->counters().app_wakeups, before + 5);
  d->stop();
  ::close(fd);
}

// with_engine_post: a post to a QP with fewer than kPostBatchInFlight packets in flight (an
// idle one, a ping-pong's) leaves from the caller's thread at once (the latency path, no loop
// round); one to a QP with that backlog is left to the loop, which is woken for it and sends it
// in its next round with whatever else is ready (one batch per plane, GSO runs across
// messages).
TEST(UdpDriver, WithEnginePost_SentAtOnceUntilABacklog_ThenLeftToTheLoop) {
  int fd = -1;
  sockaddr_in6 peer{};
  auto d = driver_and_silent_peer(fd, peer);
  ASSERT_NE(d, nullptr);
  const PeerId p = d->add_peer({peer});
  auto src = pattern(4000, 9);  // one packet
  // Not started: only the caller's thread and step() send. Ack timeout 16 (268 ms): no RTO.
  Qpn q = 0;
  uint32_t lkey = 0;
  d->with_engine([&](Engine& e) {
    q = unanswered_qp(e, p, {Path{1, 0}}, 0, 16);
    lkey = *e.register_mr(src.data(), src.size(), reinterpret_cast<uint64_t>(src.data()), 0);
  });
  ASSERT_NE(q, 0u);
  d->step(0ms);  // the wakeup of with_engine, consumed
  const UdpCounters before = d->counters();
  const auto post = [&] {
    return d->with_engine_post(q, [&](Engine& e) { return post_write_of(e, q, src, lkey); });
  };
  for (size_t i = 0; i < kPostBatchInFlight; ++i) {
    ASSERT_TRUE(post().ok()) << i;
    EXPECT_EQ(d->counters().datagrams_sent, before.datagrams_sent + i + 1) << "sent at once " << i;
  }
  EXPECT_EQ(d->counters().app_wakeups, before.app_wakeups);
  EXPECT_EQ(d->peek_engine([&](Engine& e) { return e.in_flight(q); }), kPostBatchInFlight);
  ASSERT_TRUE(post().ok());
  EXPECT_EQ(d->counters().datagrams_sent, before.datagrams_sent + kPostBatchInFlight)
      << "a backlog: left to the loop";
  EXPECT_EQ(d->counters().app_wakeups, before.app_wakeups + 1);
  const uint64_t woke = d->counters().loop_woke_app;
  d->step(0ms);  // the loop's round, woken by the post's eventfd, sends it
  EXPECT_EQ(d->counters().loop_woke_app, woke + 1) << "the post woke the loop";
  EXPECT_EQ(d->counters().datagrams_sent, before.datagrams_sent + kPostBatchInFlight + 1);
  EXPECT_EQ(d->peek_engine([&](Engine& e) { return e.in_flight(q); }), kPostBatchInFlight + 1);
  uint8_t rx[9000];
  for (size_t i = 0; i <= kPostBatchInFlight; ++i) EXPECT_GT(::recv(fd, rx, sizeof rx, 0), 0) << i;
  ::close(fd);
}

// A post that arms a timer earlier than the sleeping loop planned (the first RTO of an idle
// driver: a latency ping-pong's every message) moves the loop's alarm instead of waking it
// (issue 17: a loop round, two context switches and a lock per message), and the alarm still
// fires: the RTO retransmits on time.
TEST(UdpDriver, WithEngineFlush_EarlierDeadlineMovesTheAlarmNotTheLoop) {
  int fd = -1;
  sockaddr_in6 peer{};
  auto d = driver_and_silent_peer(fd, peer);
  ASSERT_NE(d, nullptr);
  const PeerId p = d->add_peer({peer});
  d->start();
  // Idle: no deadline (with_engine wakes the loop once: the sleep lets it settle).
  ASSERT_EQ(d->with_engine([](Engine& e) { return e.next_deadline(); }), kNever);
  std::this_thread::sleep_for(20ms);
  const UdpCounters before = d->counters();
  auto src = pattern(4000, 9);  // one packet
  // Ack timeout 16 (268 ms): no RTO during the check below, even on a loaded machine.
  post_unanswered_write(*d, p, {Path{1, 0}}, 0, src, 16, /*flush=*/true);
  uint8_t rx[8192];
  ASSERT_GT(::recv(fd, rx, sizeof rx, 0), 0) << std::strerror(errno);  // sent by this thread
  std::this_thread::sleep_for(30ms);
  const UdpCounters after = d->counters();
  EXPECT_EQ(after.loop_iterations, before.loop_iterations) << "the post woke the loop";
  EXPECT_EQ(after.timeouts, before.timeouts);
  // The alarm: the RTO fires and the WRITE goes out again (within the socket's 5 s limit).
  ASSERT_GT(::recv(fd, rx, sizeof rx, 0), 0) << "no retransmission: the alarm never rang";
  EXPECT_GT(d->counters().timeouts, before.timeouts);
  d->stop();
  ::close(fd);
}

// While an app polls (poll_progress), its thread runs the engine's timers and the loop sleeps
// past them (a TLP or RTO armed per message woke it for nothing about once per message in
// mrc-perf --latency, issue 17); when the app stops polling, the loop takes the timers back.
// The peer never answers, so every poller round here is a timer the poller ran (before, the
// poller only received and never ran one), and the RTO keeps retransmitting either way.
TEST(UdpDriver, PollProgress_PollerRunsTimersLoopTakesThemBack) {
  int fd = -1;
  sockaddr_in6 peer{};
  const int pfd = plain_socket(&peer);
  ASSERT_GE(pfd, 0);
  fd = pfd;
  UdpConfig cfg;
  cfg.planes.push_back(PlaneConfig{"::1", 0});
  cfg.poller_progress = true;
  auto d = make_driver(cfg);
  ASSERT_NE(d, nullptr);
  const PeerId p = d->add_peer({peer});
  d->start();
  auto src = pattern(4000, 9);  // one packet
  // Ack timeout 12 (4.2 ms): a few RTOs while the app polls below.
  post_unanswered_write(*d, p, {Path{1, 0}}, 0, src, 12, /*flush=*/true);
  uint8_t rx[8192];
  ASSERT_GT(::recv(fd, rx, sizeof rx, 0), 0) << std::strerror(errno);  // the first copy
  const UdpCounters before = d->counters();
  int copies = 0;
  const auto until = std::chrono::steady_clock::now() + 100ms;
  while (std::chrono::steady_clock::now() < until) {
    (void)d->poll_progress();
    while (::recv(fd, rx, sizeof rx, MSG_DONTWAIT) > 0) ++copies;
  }
  const UdpCounters polled = d->counters();
  EXPECT_GT(copies, 0) << "no retransmission while the app polled";
  EXPECT_GT(polled.poller_rounds, before.poller_rounds)
      << "the polling app never ran a timer: the loop did them all";
  std::printf("while polling 100 ms: %llu timers, %llu by the poller, %llu loop rounds\n",
              static_cast<unsigned long long>(polled.timeouts - before.timeouts),
              static_cast<unsigned long long>(polled.poller_rounds - before.poller_rounds),
              static_cast<unsigned long long>(polled.loop_iterations - before.loop_iterations));
  // Nobody polls: the loop runs the next RTO (the socket's 5 s limit bounds the wait). What
  // the socket holds was sent before `polled` was read (or after: then the counters grew).
  while (::recv(fd, rx, sizeof rx, MSG_DONTWAIT) > 0) {
  }
  ASSERT_GT(::recv(fd, rx, sizeof rx, 0), 0) << "no retransmission once the app stopped polling";
  const UdpCounters after = d->counters();
  // The loop ran it (loop_iterations counts a round when it starts to wait, so the round that
  // ran this timer may not be counted yet).
  EXPECT_GT(after.timeouts, polled.timeouts);
  EXPECT_EQ(after.poller_rounds, polled.poller_rounds);
  d->stop();
  ::close(fd);
}

// An app that stops polling to sleep (poller_leaves; the verbs face calls it from
// ibv_req_notify_cq) hands the sockets and timers back to the loop at once, not after
// poller_grace. With a 1 s grace and a WRITE nobody answers: after one poll, no retransmission
// comes while the hold lasts (nobody runs the RTO); after poller_leaves, one comes at once.
TEST(UdpDriver, PollerLeaves_LoopTakesTheTimersBackAtOnce) {
  sockaddr_in6 peer{};
  const int fd = plain_socket(&peer);
  ASSERT_GE(fd, 0);
  UdpConfig cfg;
  cfg.planes.push_back(PlaneConfig{"::1", 0});
  cfg.poller_progress = true;
  cfg.poller_grace = kMaxPollerGrace;  // 1 s
  auto d = make_driver(cfg);
  ASSERT_NE(d, nullptr);
  const PeerId p = d->add_peer({peer});
  d->start();
  auto src = pattern(4000, 9);  // one packet
  post_unanswered_write(*d, p, {Path{1, 0}}, 0, src, 12, /*flush=*/true);  // RTO 4.2 ms
  uint8_t rx[8192];
  ASSERT_GT(::recv(fd, rx, sizeof rx, 0), 0) << std::strerror(errno);  // the first copy
  const auto copy_within = [&](std::chrono::milliseconds ms) {
    pollfd q{fd, POLLIN, 0};
    return ::poll(&q, 1, static_cast<int>(ms.count())) > 0;
  };
  // The hold: what the loop or the poll itself sent around the poll is drained for 20 ms,
  // then nothing for 300 ms. A machine so slow that this ends past 800 ms into the 1 s hold
  // tries again (three times).
  bool held = false;
  for (int attempt = 0; attempt < 3 && !held; ++attempt) {
    const auto polled_at = std::chrono::steady_clock::now();
    (void)d->poll_progress();
    std::this_thread::sleep_for(20ms);
    while (::recv(fd, rx, sizeof rx, MSG_DONTWAIT) > 0) {
    }
    const bool copy = copy_within(300ms);
    if (std::chrono::steady_clock::now() - polled_at > 800ms) continue;
    EXPECT_FALSE(copy) << "the loop ran the RTO while a poller held the timers";
    held = true;
  }
  ASSERT_TRUE(held) << "three tries each took over 800 ms";
  const UdpCounters before = d->counters();
  d->poller_leaves();
  EXPECT_TRUE(copy_within(300ms)) << "no retransmission 300 ms after the poller left";
  EXPECT_GT(d->counters().timeouts, before.timeouts);
  d->stop();
  ::close(fd);
}

// Structured EVs (stev_path): each datagram carries its EV's IPv6 flow label, GSO messages
// included (one label each), and nothing else; a plain socket reads the labels (IPV6_FLOWINFO).
// IPv4 planes, labels over 20 bits and the srv6 mode are refused with a reason.
TEST(UdpDriver, StevPath_FlowLabelOnEveryDatagram) {
  constexpr int kFlowInfo = 11;  // IPV6_FLOWINFO of linux/in6.h, which clashes with netinet/in.h
  UdpConfig cfg;
  cfg.planes.push_back(PlaneConfig{"::1", 0});
  auto d = make_driver(cfg);
  ASSERT_NE(d, nullptr);
  const auto a = d->stev_path(0, 0x1234, 0x0100), b = d->stev_path(0, 0x5678, 0x0100);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->ev, b->ev);
  EXPECT_EQ(d->stev_path(0, 0x1234, 0x0100)->ev, a->ev) << "the same pair, the same EV";
  EXPECT_FALSE(d->stev_path(0, 0x100000, 0).ok());
  EXPECT_FALSE(d->stev_path(1, 1, 0).ok());
  sockaddr_in6 peer{};
  const int fd = plain_socket(&peer);
  ASSERT_GE(fd, 0);
  const int one = 1;
  ASSERT_EQ(::setsockopt(fd, IPPROTO_IPV6, kFlowInfo, &one, sizeof one), 0);
  auto src = pattern(64 * 1024, 5);  // 16 packets: GSO messages on both EVs
  post_unanswered_write(*d, d->add_peer({peer}), {*a, *b}, 0, src);
  d->start();
  std::set<uint32_t> labels;
  for (int i = 0; i < 16; ++i) {
    uint8_t rx[8192];
    iovec iov{rx, sizeof rx};
    alignas(cmsghdr) uint8_t control[64];
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = control;
    h.msg_controllen = sizeof control;
    ASSERT_GT(::recvmsg(fd, &h, 0), 0) << "datagram " << i << ": " << std::strerror(errno);
    uint32_t info = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
      if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == kFlowInfo)
        std::memcpy(&info, CMSG_DATA(c), sizeof info);
    labels.insert(ntohl(info) & 0xfffff);
  }
  d->stop();
  ::close(fd);
  EXPECT_EQ(labels, (std::set<uint32_t>{0x1234, 0x5678}));
  EXPECT_GT(d->counters().gso_messages, 0u);

  UdpConfig v4;
  v4.planes.push_back(PlaneConfig{"::ffff:127.0.0.1", 0});
  auto d4 = make_driver(v4);
  ASSERT_NE(d4, nullptr);
  const auto refused = d4->stev_path(0, 1, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("IPv4"), std::string::npos) << refused.error();
}

TEST(UdpDriver, Create_BadAddressNamesIt) {
  UdpConfig cfg;
  cfg.planes.push_back(PlaneConfig{"not-an-address", 4791});
  auto r = UdpDriver::create(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("not-an-address"), std::string::npos) << r.error();
}

TEST(UdpDriver, Create_PortInUseNamesIt) {
  auto a = make_driver(loopback_config(1));
  ASSERT_NE(a, nullptr);
  const uint16_t port = ntohs(a->local_address(0).sin6_port);
  UdpConfig cfg;
  cfg.planes.push_back(PlaneConfig{"::1", port});
  auto r = UdpDriver::create(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find(std::to_string(port)), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("bind"), std::string::npos) << r.error();
}

TEST(UdpDriver, Step_WithoutThreadDeliversWrite) {
  // Two drivers driven by step() from this thread: a WRITE round trip, no progress thread.
  auto a = make_driver(loopback_config(1));
  auto b = make_driver(loopback_config(1));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const PeerId pa = a->add_peer({b->local_address(0)});
  const PeerId pb = b->add_peer({a->local_address(0)});
  UdpDriver* d[2] = {a.get(), b.get()};
  const PeerId peer[2] = {pa, pb};
  Qpn q[2];
  CqId cq[2];
  for (int i = 0; i < 2; ++i) {
    d[i]->with_engine([&](Engine& e) {
      cq[i] = *e.create_cq(64);
      QpInit init;
      init.send_cq = init.recv_cq = cq[i];
      init.local_token = 77u + i;
      q[i] = *e.create_qp(init);
    });
  }
  for (int i = 0; i < 2; ++i) {
    d[i]->with_engine([&](Engine& e) {
      QpAttr at;
      at.state = QpState::kInit;
      ASSERT_TRUE(e.modify_qp(q[i], at, attr::kState).ok());
      at.state = QpState::kRtr;
      at.peer = peer[i];
      at.dest_qpn = q[1 - i];
      at.remote_token = 77u + (1 - i);
      at.paths = {Path{1, 0}, Path{2, 0}};
      ASSERT_TRUE(e.modify_qp(q[i], at, attr::kState | attr::kDest | attr::kPaths).ok());
      at.state = QpState::kRts;
      ASSERT_TRUE(e.modify_qp(q[i], at, attr::kState).ok());
    });
  }
  auto src = pattern(50000, 9);
  std::vector<uint8_t> dst(src.size(), 0);
  uint32_t lkey = 0, rkey = 0;
  a->with_engine([&](Engine& e) {
    lkey = *e.register_mr(src.data(), src.size(), reinterpret_cast<uint64_t>(src.data()),
                          access::kLocalWrite);
  });
  b->with_engine([&](Engine& e) {
    rkey = *e.register_mr(dst.data(), dst.size(), reinterpret_cast<uint64_t>(dst.data()),
                          access::kLocalWrite | access::kRemoteWrite);
  });
  Sge sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()), lkey};
  SendWr wr;
  wr.opcode = Opcode::kWrite;
  wr.sg = {&sge, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  wr.rkey = rkey;
  a->with_engine([&](Engine& e) { ASSERT_TRUE(e.post_send(q[0], wr).ok()); });
  const auto until = std::chrono::steady_clock::now() + kWaitLimit;
  size_t done = 0;
  while (done == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "WRITE via step() never completed";
    a->step(1ms);
    b->step(1ms);
    Completion c;
    done = a->with_engine([&](Engine& e) { return e.poll_cq(cq[0], {&c, 1}); });
    if (done) {
      EXPECT_EQ(c.status, WcStatus::kSuccess);
    }
  }
  EXPECT_TRUE(src == dst);
}

// The thread that waits does the work: 100 WRITE ping-pongs where each side's app polls its
// CQ (wait_cq spinning: poll_progress when empty) and posts the next WRITE when the peer's lands.
// Everything completes, every byte is right, and the pollers did receive (poller_rounds).
TEST_F(UdpPair, PollProgress_PollingAppCompletes) {
  constexpr int kRounds = 100;
  auto& a_src = keep(pattern(64, 21));
  auto& b_src = keep(pattern(64, 22));
  auto& a_dst = keep(std::vector<uint8_t>(64, 0));  // host 0's memory, written by host 1
  auto& b_dst = keep(std::vector<uint8_t>(64, 0));
  const uint32_t a_lkey = reg(0, a_src), a_rkey = reg(0, a_dst);
  const uint32_t b_lkey = reg(1, b_src), b_rkey = reg(1, b_dst);
  // Which thread receives a datagram is the scheduler's choice: a poller holds the sockets
  // for poller_grace (10 us) after its last poll, and on a loaded machine the progress thread
  // can take every one of 100 rounds. So rounds go on (up to 10 s) until a poller has
  // received once; a poller that never receives fails.
  auto poller_rounds = [&] {
    return hosts_[0].drv->counters().poller_rounds + hosts_[1].drv->counters().poller_rounds;
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int i = 0;
       i < kRounds || (poller_rounds() == 0 && std::chrono::steady_clock::now() < until); ++i) {
    Sge sge;
    post(0, rdma_wr(Opcode::kWrite, 2 * i, a_src, a_lkey, b_dst, b_rkey, sge));
    auto ca = wait_cq(0, 1, "host 0's WRITE", /*spin=*/true);
    ASSERT_EQ(ca.size(), 1u);
    EXPECT_EQ(ca[0].status, WcStatus::kSuccess);
    post(1, rdma_wr(Opcode::kWrite, 2 * i + 1, b_src, b_lkey, a_dst, a_rkey, sge));
    auto cb = wait_cq(1, 1, "host 1's WRITE", /*spin=*/true);
    ASSERT_EQ(cb.size(), 1u);
    EXPECT_EQ(cb[0].status, WcStatus::kSuccess);
  }
  for (auto& h : hosts_) h.drv->with_engine([](Engine&) {});  // orders the writes before reads
  EXPECT_TRUE(a_src == b_dst);
  EXPECT_TRUE(b_src == a_dst);
  EXPECT_GT(poller_rounds(), 0u)
      << "the polling apps never received in 10 s: the progress threads did all the work";
}

// An app that polled (its progress thread stepped back) and then sleeps on a completion
// channel: the WRITE_IMM that arrives while nobody polls still lands and wakes it.
TEST_F(UdpPair, PollProgress_SleepingAppCompletes) {
  auto& src = keep(pattern(8192, 23));
  auto& dst = keep(std::vector<uint8_t>(src.size(), 0));
  const uint32_t lkey = reg(0, src), rkey = reg(1, dst);
  for (int round = 0; round < 20; ++round) {
    post_recv(1, RecvWr{static_cast<uint64_t>(round), {}});
    poll_then_stop(1);
    Sge sge;
    SendWr wr = rdma_wr(Opcode::kWrite, round, src, lkey, dst, rkey, sge);
    wr.opcode = Opcode::kWriteImm;
    wr.imm = 0x100 + round;
    post(0, wr);
    // Sleep until the receive completes (checked under the driver's lock, then waited for
    // on the loop's progress callback, as a completion channel's reader does).
    Completion c{};
    const auto until = std::chrono::steady_clock::now() + kWaitLimit;
    for (;;) {
      const size_t k = hosts_[1].drv->peek_engine([&](Engine& e) {
        return e.poll_cq(hosts_[1].cq, {&c, 1});
      });
      if (k == 1) break;
      std::unique_lock lock(progress_mu_);
      const uint64_t seen = progress_rounds_;
      ASSERT_TRUE(progress_cv_.wait_until(lock, until, [&] { return progress_rounds_ != seen; }) ||
                  hosts_[1].drv->peek_engine([&](Engine& e) { return e.cq_depth(hosts_[1].cq); }))
          << "round " << round << ": the sleeping app was never woken";
    }
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_EQ(c.opcode, WcOpcode::kRecvWriteImm);
    EXPECT_EQ(c.imm, 0x100u + round);
    ASSERT_EQ(wait_cq(0, 1, "WRITE_IMM").size(), 1u);
  }
  hosts_[1].drv->with_engine([](Engine&) {});
  EXPECT_TRUE(src == dst);
}

// An app that polled and then spins on memory without calling the driver (ib_write_lat's
// wait for the peer's WRITE): the WRITE lands.
TEST_F(UdpPair, PollProgress_MemorySpinningAppCompletes) {
  auto& dst = keep(std::vector<uint8_t>(64, 0));
  const uint32_t rkey = reg(1, dst);
  for (int round = 1; round <= 20; ++round) {
    auto& src = keep(std::vector<uint8_t>(64, static_cast<uint8_t>(round)));
    const uint32_t lkey = reg(0, src);
    poll_then_stop(1);
    Sge sge;
    post(0, rdma_wr(Opcode::kWrite, round, src, lkey, dst, rkey, sge));
    const auto until = std::chrono::steady_clock::now() + kWaitLimit;
    while (!byte_is(dst, dst.size() - 1, static_cast<uint8_t>(round))) {
      ASSERT_LT(std::chrono::steady_clock::now(), until)
          << "round " << round << ": the WRITE never landed in the spinning app's memory";
    }
    hosts_[1].drv->with_engine([](Engine&) {});  // the rest of the packet's copy, ordered
    EXPECT_TRUE(src == dst) << "round " << round;
    ASSERT_EQ(wait_cq(0, 1, "WRITE").size(), 1u);
  }
}

class UdpPairNoThread : public UdpPairBase, public ::testing::Test {
 protected:
  void SetUp() override {
    start_threads_ = false;
    set_up();
  }
  void TearDown() override { tear_down(); }
};

// Without progress threads, pollers alone move a WRITE and its ACK (as mrc-perf --latency
// polls both ends from one thread). One packet: pacing and retransmission are timers, which
// stay with the loop.
TEST_F(UdpPairNoThread, PollProgress_WithoutThreadCompletesWrite) {
  auto& src = keep(pattern(4000, 24));
  auto& dst = keep(std::vector<uint8_t>(src.size(), 0));
  const uint32_t lkey = reg(0, src), rkey = reg(1, dst);
  Sge sge;
  post(0, rdma_wr(Opcode::kWrite, 5, src, lkey, dst, rkey, sge));
  hosts_[0].drv->with_engine_flush([](Engine&) { return 0; });  // what with_engine queued
  const auto until = std::chrono::steady_clock::now() + kWaitLimit;
  size_t done = 0;
  while (done == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the WRITE never completed";
    (void)hosts_[1].drv->poll_progress();
    (void)hosts_[0].drv->poll_progress();
    Completion c;
    done = hosts_[0].drv->peek_engine([&](Engine& e) { return e.poll_cq(hosts_[0].cq, {&c, 1}); });
    if (done) {
      EXPECT_EQ(c.status, WcStatus::kSuccess);
    }
  }
  EXPECT_TRUE(src == dst);
  EXPECT_GT(hosts_[0].drv->counters().poller_rounds, 0u);
  EXPECT_GT(hosts_[1].drv->counters().poller_rounds, 0u);
}

// A poller's syscalls (issue 17): with several planes one readiness check (epoll_wait) per
// poll and a recvmmsg for each plane that holds something, none for the others; with one
// plane, recvmmsg straight. Planes of other progress threads are never read by a poller.
TEST(UdpDriver, PollProgress_ReadsOnlyReadyPlanes) {
  const auto send_to = [](const UdpDriver& d, uint16_t plane) {
    const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    const sockaddr_in6 to = d.local_address(plane);
    const uint8_t junk[16] = {};
    ASSERT_EQ(::sendto(fd, junk, sizeof junk, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(sizeof junk));
    ::close(fd);
  };
  UdpConfig cfg = loopback_config(4);
  cfg.poller_progress = true;
  auto d = make_driver(cfg);  // not started: nothing but this thread reads the sockets
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->poll_progress());  // nothing there: one check, no recvmmsg
  UdpCounters c = d->counters();
  EXPECT_EQ(c.poller_polls, 1u);
  EXPECT_EQ(c.poller_ready_checks, 1u);
  EXPECT_EQ(c.poller_recvmmsg, 0u);
  send_to(*d, 1);
  send_to(*d, 3);
  EXPECT_TRUE(d->poll_progress());  // loopback delivers within sendto
  c = d->counters();
  EXPECT_EQ(c.poller_ready_checks, 2u);
  EXPECT_EQ(c.poller_recvmmsg, 2u) << "planes 1 and 3, not 0 and 2";
  EXPECT_EQ(c.datagrams_received, 2u);
  EXPECT_EQ(c.poller_busy, 0u);

  // Two progress threads: planes 1 and 3 are thread 1's, which pollers leave alone.
  cfg.progress_threads = 2;
  auto two = make_driver(cfg);
  ASSERT_NE(two, nullptr);
  send_to(*two, 1);
  EXPECT_FALSE(two->poll_progress());
  send_to(*two, 2);
  EXPECT_TRUE(two->poll_progress());
  c = two->counters();
  EXPECT_EQ(c.poller_ready_checks, 2u);
  EXPECT_EQ(c.poller_recvmmsg, 1u);
  EXPECT_EQ(c.datagrams_received, 1u) << "plane 1's datagram is thread 1's to read";

  // One plane: no readiness check, recvmmsg is the test.
  UdpConfig one_cfg = loopback_config(1);
  one_cfg.poller_progress = true;
  auto one = make_driver(one_cfg);
  ASSERT_NE(one, nullptr);
  EXPECT_FALSE(one->poll_progress());
  send_to(*one, 0);
  EXPECT_TRUE(one->poll_progress());
  c = one->counters();
  EXPECT_EQ(c.poller_ready_checks, 0u);
  EXPECT_EQ(c.poller_recvmmsg, 2u);
  EXPECT_EQ(c.datagrams_received, 1u);
}

// UdpConfig::poller_grace: for that long after a poll the loop leaves the sockets to pollers
// (a datagram that comes waits for the next poll; with the 10 us default the loop's second
// round here would read it), and once it is over without a poll the loop reads again (an app
// that stopped polling still progresses). The hold is 1 s, so the 50 ms of loop rounds fall
// inside it on a loaded machine too.
TEST(UdpDriver, PollProgress_GraceHoldsSocketsThenLoopTakesBack) {
  UdpConfig cfg = loopback_config(1);
  cfg.poller_progress = true;
  cfg.poller_grace = kMaxPollerGrace;
  auto d = make_driver(cfg);  // not started: step() is the loop, in this thread
  ASSERT_NE(d, nullptr);
  const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const sockaddr_in6 to = d->local_address(0);
  const auto send_junk = [&] {
    const uint8_t junk[16] = {};
    ASSERT_EQ(::sendto(fd, junk, sizeof junk, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(sizeof junk));
  };
  EXPECT_FALSE(d->poll_progress());  // nothing yet; the hold starts
  send_junk();
  const auto polled = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < polled + 50ms) d->step(engine::Duration{10'000'000});
  EXPECT_EQ(d->counters().datagrams_received, 0u) << "the loop read during the pollers' hold";
  EXPECT_EQ(d->counters().loop_rx_rounds, 0u);
  EXPECT_TRUE(d->poll_progress());  // the poller reads it
  EXPECT_EQ(d->counters().datagrams_received, 1u);
  // Nobody polls from here: the loop takes the sockets back when the hold ends.
  send_junk();
  const auto until = std::chrono::steady_clock::now() + kMaxPollerGrace + kWaitLimit;
  while (d->counters().datagrams_received < 2) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the loop never took the sockets back";
    d->step(engine::Duration{100'000'000});
  }
  const UdpCounters c = d->counters();
  EXPECT_EQ(c.loop_rx_rounds, 1u);
  EXPECT_GE(c.loop_woke_poller_end, 1u) << "the hold's end is what woke the loop";
  ::close(fd);
}

// poller_grace out of 0..1 s is refused, naming it.
TEST(UdpDriver, Create_RefusesPollerGraceOutOfRange) {
  for (const engine::Duration g : {engine::Duration{-1}, kMaxPollerGrace + engine::Duration{1}}) {
    UdpConfig cfg = loopback_config(1);
    cfg.poller_grace = g;
    auto d = UdpDriver::create(cfg);
    ASSERT_FALSE(d.ok()) << g.count();
    EXPECT_NE(d.error().find("poller_grace must be 0..1 s"), std::string::npos) << d.error();
  }
}

// spin out of 0..10 ms (kAutoSpin aside) is refused, naming it; kAutoSpin and the bounds are
// taken, and the default is default_spin()'s choice: 50 us with 8 CPUs or more, else 0.
TEST(UdpDriver, Create_SpinRangeAndDefault) {
  for (const engine::Duration g : {engine::Duration{-2}, kMaxSpin + engine::Duration{1}}) {
    UdpConfig cfg = loopback_config(1);
    cfg.spin = g;
    auto d = UdpDriver::create(cfg);
    ASSERT_FALSE(d.ok()) << g.count();
    EXPECT_NE(d.error().find("spin must be 0..10 ms"), std::string::npos) << d.error();
  }
  for (const engine::Duration g : {kAutoSpin, engine::Duration{0}, kMaxSpin}) {
    UdpConfig cfg = loopback_config(1);
    cfg.spin = g;
    EXPECT_TRUE(UdpDriver::create(cfg).ok()) << g.count();
  }
  cpu_set_t cpus;
  ASSERT_EQ(::sched_getaffinity(0, sizeof cpus, &cpus), 0);
  EXPECT_EQ(default_spin(), CPU_COUNT(&cpus) >= 8 ? engine::Duration{50'000} : engine::Duration{0});
}

// poller_progress = false: poll_progress leaves a waiting datagram to the loop.
TEST(UdpDriver, PollProgress_OffLeavesSocketsToLoop) {
  UdpConfig cfg = loopback_config(1);
  cfg.poller_progress = false;
  auto d = make_driver(cfg);
  ASSERT_NE(d, nullptr);
  const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const sockaddr_in6 to = d->local_address(0);
  const uint8_t junk[16] = {};
  ASSERT_EQ(::sendto(fd, junk, sizeof junk, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(sizeof junk));
  ::close(fd);
  EXPECT_FALSE(d->poll_progress());
  EXPECT_EQ(d->counters().datagrams_received, 0u);
  d->step(kWaitLimit);  // the datagram is there: the loop reads it
  EXPECT_EQ(d->counters().datagrams_received, 1u);
}

}  // namespace
}  // namespace mrc::io

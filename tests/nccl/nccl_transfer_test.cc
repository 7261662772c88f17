// libnccl-net-mrc driven across processes on loopback, as NCCL drives it (the shape of
// aws-ofi-nccl's functional tests): connection, message transfer 0 B .. 1 GiB with every byte
// checked, a ring of 4 ranks, grouped receives with tags, close with requests in flight, a
// reused listen comm, many comms at once, and a killed peer turning into an error from test().
// Every rank is a forked process with its own plugin instance (two planes on ::1, ephemeral
// ports); the parent never loads the plugin.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>
#include <thread>

#include "control.h"  // tools/mrcctl: the device's control socket
#include "mrc/observe/segment.h"
#include "plugin_harness.h"

namespace mrc::nccl::harness {
namespace {

std::map<std::string, std::string> loopback_env() {
  const std::string cfg = "/tmp/mrc-nccl-xfer-" + std::to_string(::getpid()) + ".json";
  std::ofstream(cfg) << "{}\n";
  return {{"MRC_CONFIG", cfg},
          {"MRC_PLANES", "::1,::1"},
          {"MRC_PORT", "0"},
          {"MRC_NIC_GBPS", "8"},
          {"NCCL_MRC_TIMEOUT", "14"},
          {"NCCL_MRC_RETRY_CNT_EXP", "0"}};
}
std::vector<RankSpec> ranks(int n) {
  return std::vector<RankSpec>(static_cast<size_t>(n), RankSpec{loopback_env()});
}

// A registered buffer, deregistered when it goes.
struct Buf {
  Api* a;
  void* comm;
  std::vector<uint8_t> mem;
  void* mh = nullptr;
  Buf(Api& api, void* c, size_t n) : a(&api), comm(c), mem(std::max<size_t>(n, 1)) {
    if (a->reg_mr(comm, mem.data(), mem.size(), MRC_NCCL_PTR_HOST, &mh)) mh = nullptr;
  }
  ~Buf() {
    if (mh) a->dereg_mr(comm, mh);
  }
  uint8_t* data() { return mem.data(); }
};

// Rank 1 listens and publishes its handle in slot 0; rank 0 connects.
struct Pair {
  Api a;
  Handle handle{};  // the listener's handle, as listen() made it (connect copies it)
  void* send = nullptr;
  void* recv = nullptr;
  void* listen = nullptr;
};
constexpr int kNewest = 0;  // pair_up's version: the newest table the plugin exports
std::string pair_up(Plugin& pl, Board& b, int rank, Pair* p, int version = 12) {
  if (!pl.lib) return "dlopen: " + pl.error;
  p->a = version == kNewest ? pl.newest() : pl.api(version);
  if (!p->a.version) return pl.error;
  if (int r = p->a.init()) return "init returned " + std::to_string(r);
  if (rank == 1) {
    if (p->a.listen(0, p->handle.data(), &p->listen)) return "listen failed";
    b.put(0, p->handle);
    return wait_accept(p->a, p->listen, &p->recv);
  }
  if (!b.get(0, &p->handle)) return "no handle from the listener";
  return wait_connect(p->a, p->handle, &p->send);
}

// The plugin's last WARN, for a failure's message.
std::string last_warn() { return warnings().empty() ? "" : " (WARN: " + warnings().back() + ")"; }

// Sends `sizes` (in order) from rank 0 to rank 1, `inflight` at a time; the receiver's buffers
// are `extra` bytes larger than each send. Every byte checked, every reported size checked.
std::string transfer(Pair& p, int rank, const std::vector<size_t>& sizes, int inflight,
                     size_t extra = 0) {
  const size_t biggest = *std::max_element(sizes.begin(), sizes.end()) + extra;
  const int slots = inflight;
  Buf buf(p.a, rank == 0 ? p.send : p.recv, biggest * static_cast<size_t>(slots));
  if (!buf.mh) return "regMr failed";
  std::vector<void*> req(static_cast<size_t>(slots), nullptr);
  size_t next = 0, done = 0;
  while (done < sizes.size()) {
    for (int s = 0; s < slots && next < sizes.size(); ++s) {
      if (req[s] || next % static_cast<size_t>(slots) != static_cast<size_t>(s)) continue;
      uint8_t* at = buf.data() + biggest * static_cast<size_t>(s);
      int r;
      if (rank == 0) {
        fill(at, sizes[next], next);
        r = p.a.isend(p.send, at, sizes[next], 7, buf.mh, &req[s]);
      } else {
        size_t sz = sizes[next] + extra;
        int tag = 7;
        void* d = at;
        void* mh = buf.mh;
        r = p.a.irecv(p.recv, 1, &d, &sz, &tag, &mh, &req[s]);
      }
      if (r) return "post " + std::to_string(next) + " returned " + std::to_string(r) + last_warn();
      if (req[s]) ++next;
    }
    const size_t s = done % static_cast<size_t>(slots);
    if (!req[s]) continue;
    int got = -1;
    int d = 0;
    if (int r = p.a.test(req[s], &d, &got))
      return "test of message " + std::to_string(done) + " returned " + std::to_string(r) +
             last_warn();
    if (!d) continue;
    req[s] = nullptr;
    if (got != static_cast<int>(sizes[done]))
      return "message " + std::to_string(done) + ": size " + std::to_string(got) + ", sent " +
             std::to_string(sizes[done]);
    if (rank == 1) {
      if (auto e = verify(buf.data() + biggest * s, sizes[done], done); !e.empty()) return e;
    }
    ++done;
  }
  return "";
}

std::string close_pair(Pair& p) {
  int r = 0;
  if (p.send) r |= p.a.close_send(p.send);
  if (p.recv) r |= p.a.close_recv(p.recv);
  if (p.listen) r |= p.a.close_listen(p.listen);
  r |= p.a.finalize();
  return r ? "close failed" : "";
}

TEST(NcclTransfer, Connection_EveryAbiVersion) {
  for (int v = 6; v <= 12; ++v) {
    Board b(1);
    const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
      Plugin pl;
      Pair p;
      if (auto e = pair_up(pl, b, rank, &p, v); !e.empty()) return e;
      if (auto e = transfer(p, rank, {0, 1, 4096, 100000}, 2); !e.empty()) return e;
      return close_pair(p);
    });
    EXPECT_EQ(err, "") << "ABI v" << v;
  }
}

// A plugin built for another NCCL exports only some tables: the harness takes the newest one
// exported, looking from v12 down to v6 as NCCL does, and data flows through it. (Asking for
// v12 only, the harness called through a null table for a plugin exporting v6..v11.)
TEST(NcclTransfer, PartialPlugins_NewestExportedTableCarriesData) {
  struct Case {
    const char* path;
    int want;
  };
  for (const Case c : {Case{MRC_NCCL_PLUGIN_V6TO11, 11}, Case{MRC_NCCL_PLUGIN_V8TO10, 10},
                       Case{MRC_NCCL_PLUGIN_V6ONLY, 6}, Case{MRC_NCCL_PLUGIN_PATH, 12}}) {
    Board b(1);
    const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
      Plugin pl(c.path);
      Pair p;
      if (auto e = pair_up(pl, b, rank, &p, kNewest); !e.empty()) return e;
      if (p.a.version != c.want) return "loaded v" + std::to_string(p.a.version);
      if (pl.api(c.want + 1).version) return "a table newer than the newest was found";
      if (auto e = transfer(p, rank, {0, 1, 4096, 300000}, 2); !e.empty()) return e;
      return close_pair(p);
    });
    EXPECT_EQ(err, "") << c.path;
  }
}

// A library that exports no ncclNetPlugin_vN: a clear error naming the range, and calls that
// fail instead of crashing.
TEST(NcclTransfer, PluginWithNoTable_ClearErrorAndNoCallThroughNull) {
  const std::string err = run_ranks(ranks(1), [&](int) -> std::string {
    Plugin pl(MRC_NCCL_PLUGIN_NONE);
    if (!pl.lib) return "dlopen: " + pl.error;
    Api a = pl.newest();
    if (a.version != 0) return "found v" + std::to_string(a.version);
    if (pl.error != "the plugin exports none of ncclNetPlugin_v12 .. _v6") return pl.error;
    if (a.init() != mrcNcclInternalError) return "init of a missing table did not fail";
    int n = -1;
    if (a.devices(&n) != mrcNcclInternalError || n != 0) return "devices of a missing table";
    Api v12 = pl.api(12);
    if (v12.version != 0 || pl.error != "the plugin does not export ncclNetPlugin_v12")
      return "api(12): " + pl.error;
    return "";
  });
  EXPECT_EQ(err, "");
}

TEST(NcclTransfer, MessageSizes_0B_To_1GiB_EveryByteChecked) {
  Board b(1);
  const std::string err = run_ranks(
      ranks(2),
      [&](int rank) -> std::string {
        Plugin pl;
        Pair p;
        if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
        std::vector<size_t> sizes = {0, 1, 7, 4095, 4096, 4097, 65536, 1 << 20, 3 << 20, 64 << 20};
        if (auto e = transfer(p, rank, sizes, 4, /*extra=*/100); !e.empty()) return e;
        if (auto e = transfer(p, rank, {size_t{1} << 30}, 1); !e.empty()) return "1 GiB: " + e;
        return close_pair(p);
      },
      300);
  EXPECT_EQ(err, "");
}

TEST(NcclTransfer, ThirtyTwoRequestsInFlight) {
  Board b(1);
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    std::vector<size_t> sizes(2000);
    for (size_t i = 0; i < sizes.size(); ++i) sizes[i] = (i * 7919) % 70000;
    if (auto e = transfer(p, rank, sizes, 32); !e.empty()) return e;
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// NCCL_MRC_QPS_PER_CONN=4: a connection's messages go to its 4 QPs in turn (the acceptor
// makes as many as the connector's HELLO lists). Every byte arrives, every QP carries a share
// (the receiver's statistics segment), and the requests still in flight when the receiver
// closes right after its last completion complete through BYE's per-QP counts.
TEST(NcclTransfer, FourQpsPerConnection_EveryQpCarriesItsShare) {
  Board b(1);
  auto rs = ranks(2);
  for (auto& r : rs) r.env["NCCL_MRC_QPS_PER_CONN"] = "4";
  const std::string err = run_ranks(rs, [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    std::vector<size_t> sizes(400);
    for (size_t i = 0; i < sizes.size(); ++i) sizes[i] = 1 + (i * 7919) % 300000;
    if (auto e = transfer(p, rank, sizes, 8); !e.empty()) return e;
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a fresh snapshot
      std::vector<uint64_t> bytes;
      for (const auto& snap : observe::read_all(::getpid()))
        for (const auto& q : snap.qps) bytes.push_back(q.rx_payload_bytes);
      if (bytes.size() != 4) return "the receiver has " + std::to_string(bytes.size()) + " QPs";
      for (uint64_t b : bytes)
        if (b < 10'000'000) return "a QP carried only " + std::to_string(b) + " bytes";
    }
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// The rate hints (NCCL_MRC_CC_*_RATE) reach the engine as QpAttr::cc_rates: the QP keeps the
// automatic profile and learns its base RTT, and its window cap is the max rate x the base RTT
// it runs with (8000 Mbit/s = 1 byte per ns). Before, the plugin installed a fixed profile
// (mrcctl: "qp", base_rtt 0) sized at the starting base RTT.
TEST(NcclTransfer, RateHints_QpStillLearnsItsBaseRtt) {
  Board b(1);
  auto rs = ranks(2);
  for (auto& r : rs) r.env["NCCL_MRC_CC_MAX_RATE"] = "8000";
  const std::string kSkip = "skip: no control socket (needs root for /run/mrc)";
  const std::string err = run_ranks(rs, [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    std::vector<size_t> sizes(200, 200000);
    if (auto e = transfer(p, rank, sizes, 8); !e.empty()) return e;
    std::string found;
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a fresh snapshot
      const auto snaps = observe::read_all(::getpid());
      if (snaps.size() != 1) return "expected one device, saw " + std::to_string(snaps.size());
      if (!snaps[0].device.has_control) {
        found = kSkip;
      } else {
        auto show = mrcctl::control_request(snaps[0].pid, snaps[0].device.index,
                                            nlohmann::json{{"cmd", "cc_show"}}, 2000);
        if (!show.ok()) return "cc_show: " + show.error().error;
        if ((*show)["qps"].size() != 1) return "cc_show: " + show->dump();
        const auto& q = (*show)["qps"][0];
        if (q["profile"] != "engine default" || q["base_rtt"].get<uint64_t>() == 0 ||
            q["max_cwnd"] != q["base_rtt"])
          return "not learning with the rates applied: " + q.dump();
      }
    }
    const std::string closed = close_pair(p);
    return closed.empty() ? found : closed;
  });
  if (err.find(kSkip) != std::string::npos) GTEST_SKIP() << err;
  EXPECT_EQ(err, "");
}

TEST(NcclTransfer, RingOfFourRanks) {
  Board b(4);  // slot r: rank r's handle, read by rank r-1
  const std::string err = run_ranks(ranks(4), [&](int rank) -> std::string {
    Plugin pl;
    Api a = pl.api(12);
    if (a.init()) return "init";
    Handle mine{};
    void* listen = nullptr;
    if (a.listen(0, mine.data(), &listen)) return "listen";
    b.put(rank, mine);
    Handle next;
    if (!b.get((rank + 1) % 4, &next)) return "no handle from the next rank";
    void* send = nullptr;
    void* recv = nullptr;
    const double end = now_s() + 20;
    while ((!send || !recv) && now_s() < end) {
      if (!send && a.connect(0, next.data(), &send)) return "connect";
      if (!recv && a.accept(listen, &recv)) return "accept";
    }
    if (!send || !recv) return "ring not connected";
    constexpr size_t kSize = 1 << 20;
    constexpr int kSteps = 20;
    auto out_p = std::make_unique<Buf>(a, send, kSize),
         in_p = std::make_unique<Buf>(a, recv, kSize);
    Buf& out = *out_p;
    Buf& in = *in_p;
    for (int step = 0; step < kSteps; ++step) {
      fill(out.data(), kSize, static_cast<uint64_t>(rank * 1000 + step));
      void* sreq = nullptr;
      void* rreq = nullptr;
      size_t sz = kSize;
      int tag = step;
      void* d = in.data();
      void* mh = in.mh;
      while (!rreq)
        if (a.irecv(recv, 1, &d, &sz, &tag, &mh, &rreq)) return "irecv";
      while (!sreq)
        if (a.isend(send, out.data(), kSize, step, out.mh, &sreq)) return "isend";
      int got = 0;
      if (wait_test(a, sreq, &got) || wait_test(a, rreq, &got))
        return "test at step " + std::to_string(step);
      const int prev = (rank + 3) % 4;
      if (auto e = verify(in.data(), kSize, static_cast<uint64_t>(prev * 1000 + step)); !e.empty())
        return e;
    }
    out_p.reset();
    in_p.reset();
    a.close_send(send);
    a.close_recv(recv);
    a.close_listen(listen);
    return a.finalize() ? "finalize" : "";
  });
  EXPECT_EQ(err, "");
}

TEST(NcclTransfer, GroupedReceiveWithTags) {
  Board b(1);
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    constexpr int kN = 8;
    constexpr size_t kMax = 256 << 10;
    auto buf_p = std::make_unique<Buf>(p.a, rank == 0 ? p.send : p.recv, kN * kMax);
    Buf& buf = *buf_p;
    for (int round = 0; round < 10; ++round) {
      if (rank == 1) {
        void* d[kN];
        size_t sz[kN];
        int tags[kN];
        void* mh[kN];
        for (int i = 0; i < kN; ++i) {
          d[i] = buf.data() + i * kMax;
          sz[i] = kMax;
          tags[i] = 100 + i;
          mh[i] = buf.mh;
        }
        void* req = nullptr;
        while (!req)
          if (p.a.irecv(p.recv, kN, d, sz, tags, mh, &req)) return "irecv";
        int got[kN];
        if (int r = wait_test(p.a, req, got)) return "test " + std::to_string(r);
        for (int i = 0; i < kN; ++i) {
          const size_t want = 1000u * (i + 1) + round;
          if (got[i] != static_cast<int>(want))
            return "buffer " + std::to_string(i) + " got " + std::to_string(got[i]);
          if (auto e = verify(buf.data() + i * kMax, want, round * 100 + i); !e.empty()) return e;
        }
      } else {
        // Sends go out in a shuffled tag order; the tag picks the buffer.
        std::vector<int> order(kN);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), std::mt19937(round));
        std::vector<void*> reqs;
        for (int i : order) {
          const size_t n = 1000u * (i + 1) + round;
          fill(buf.data() + i * kMax, n, round * 100 + i);
          void* req = nullptr;
          while (!req)
            if (p.a.isend(p.send, buf.data() + i * kMax, n, 100 + i, buf.mh, &req)) return "isend";
          reqs.push_back(req);
        }
        for (void* r : reqs) {
          int got = 0;
          if (wait_test(p.a, r, &got)) return "test send";
        }
      }
    }
    buf_p.reset();
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// Eager sends go once the send comm has seen a CTS record (and no grouped receive): one
// message through the CTS first.
std::string warm_up(Pair& p, int rank) { return transfer(p, rank, {8}, 1); }

// Polls test() on a request for `seconds`: "" if it stayed not done and without error.
std::string stays_pending(Api& a, void* req, double seconds) {
  for (const double end = now_s() + seconds; now_s() < end;) {
    int done = 0;
    if (int r = a.test(req, &done, nullptr)) return "test returned " + std::to_string(r);
    if (done) return "done";
  }
  return "";
}

// Eager sends (net.h): up to 8 messages of at most NCCL_MRC_EAGER (8 KiB) leave before the
// receiver has posted anything (isend returns a request at once, not NULL); the ninth waits
// for a slot. Their requests complete only once the receives' CTS records place them. Each
// lands in its receive with its size and bytes; then a stream that mixes eager and CTS-driven
// (rendezvous) sizes, 8 in flight, keeps its order.
TEST(NcclTransfer, EagerSends_GoBeforeTheReceive_ThenMixWithRendezvousInOrder) {
  Board b(1);
  const std::vector<size_t> early = {0, 1, 7, 100, 4096, 8191, 8192, 64, 9};
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    if (auto e = warm_up(p, rank); !e.empty()) return e;
    {
      Buf buf(p.a, rank == 0 ? p.send : p.recv, early.size() * 8192);
      if (!buf.mh) return "regMr failed";
      std::vector<void*> reqs(early.size(), nullptr);
      if (rank == 0) {
        for (size_t i = 0; i < early.size(); ++i) {
          uint8_t* at = buf.data() + i * 8192;
          fill(at, early[i], i);
          if (int r = p.a.isend(p.send, at, early[i], 7, buf.mh, &reqs[i]))
            return "isend " + std::to_string(i) + " returned " + std::to_string(r);
          if (i < 8 && !reqs[i]) return "eager isend " + std::to_string(i) + " waited";
          if (i == 8 && reqs[i]) return "a ninth eager isend found a slot";
        }
        // Acknowledged by now, but not placed: not done.
        if (auto e = stays_pending(p.a, reqs[0], 0.05); !e.empty())
          return "eager send before its receive: " + e;
        Handle go{};
        b.put(0, go);
        while (!reqs[8])
          if (p.a.isend(p.send, buf.data() + 8 * 8192, early[8], 7, buf.mh, &reqs[8]))
            return "isend 8";
        for (size_t i = 0; i < early.size(); ++i) {
          int got = -1;
          if (int r = wait_test(p.a, reqs[i], &got)) return "test send " + std::to_string(r);
        }
      } else {
        Handle go;
        if (!b.get(0, &go, 30)) return "no word from the sender";
        for (size_t i = 0; i < early.size(); ++i) {
          size_t sz = 8192;
          int tag = 7;
          void* d = buf.data() + i * 8192;
          void* mh = buf.mh;
          while (!reqs[i])
            if (p.a.irecv(p.recv, 1, &d, &sz, &tag, &mh, &reqs[i])) return "irecv";
        }
        for (size_t i = 0; i < early.size(); ++i) {
          int got = -1;
          if (int r = wait_test(p.a, reqs[i], &got)) return "test recv " + std::to_string(r);
          if (got != static_cast<int>(early[i]))
            return "message " + std::to_string(i) + ": size " + std::to_string(got);
          if (auto e = verify(buf.data() + i * 8192, early[i], i); !e.empty()) return e;
        }
      }
    }
    const std::vector<size_t> mixed = {8,     100000, 0, 8192, 8193, 1, 65536, 3, 3, 3,
                                       3,     3,      3, 3,    3,    3, 1 << 20, 5, 9000, 2};
    if (auto e = transfer(p, rank, mixed, 8); !e.empty()) return e;
    if (auto e = transfer(p, rank, mixed, 8, 4096); !e.empty()) return e;
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// Two grouped receives of tags {1, 2}: a send of tag 1 while the first group waits for its tag
// 2 is for the second group, so isend returns NULL (NCCL retries it, as with its IB transport)
// until tag 2 has filled the first; every message lands in its group's buffer of its tag.
TEST(NcclTransfer, GroupedReceives_ATagForTheNextGroupWaits) {
  Board b(1);
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    {
      Buf buf(p.a, rank == 0 ? p.send : p.recv, 4 * 64);
      if (!buf.mh) return "regMr failed";
      if (rank == 1) {
        std::vector<void*> reqs(2, nullptr);
        for (int g = 0; g < 2; ++g) {
          void* d[2] = {buf.data() + g * 128, buf.data() + g * 128 + 64};
          size_t sz[2] = {64, 64};
          int tags[2] = {1, 2};
          void* mh[2] = {buf.mh, buf.mh};
          while (!reqs[g])
            if (p.a.irecv(p.recv, 2, d, sz, tags, mh, &reqs[g])) return "irecv";
        }
        for (int g = 0; g < 2; ++g) {
          int got[2] = {0, 0};
          if (wait_test(p.a, reqs[g], got)) return "test group " + std::to_string(g);
          for (int t = 0; t < 2; ++t) {
            const size_t n = 10 + 10 * g + t;  // group g, tag t + 1
            if (got[t] != static_cast<int>(n)) return "size " + std::to_string(got[t]);
            if (auto e = verify(buf.data() + g * 128 + t * 64, n, 10 * g + t); !e.empty()) return e;
          }
        }
      } else {
        // (group, tag) in the order sent: 0/1, then 1/1 (must wait), 0/2, 1/2.
        auto send = [&](int g, int tag, bool must_wait, void** req) -> std::string {
          uint8_t* at = buf.data() + g * 128 + (tag - 1) * 64;
          const size_t n = 10 + 10 * g + (tag - 1);
          fill(at, n, 10 * g + (tag - 1));
          *req = nullptr;
          for (const double end = now_s() + (must_wait ? 0.05 : 30); !*req && now_s() < end;)
            if (int r = p.a.isend(p.send, at, n, tag, buf.mh, req))
              return "isend returned " + std::to_string(r) + last_warn();
          if (must_wait == (*req != nullptr)) return must_wait ? "did not wait" : "never went";
          return "";
        };
        std::array<void*, 4> reqs{};
        void* early = nullptr;
        for (auto e : {send(0, 1, false, &reqs[0]), send(1, 1, true, &early),
                       send(0, 2, false, &reqs[1]), send(1, 1, false, &reqs[2]),
                       send(1, 2, false, &reqs[3])})
          if (!e.empty()) return e;
        for (void* r : reqs)
          if (wait_test(p.a, r, nullptr)) return "test send";
      }
    }
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// A send larger than its receive: InvalidUsage with a WARN that says so. Above the eager
// limit (NCCL_MRC_EAGER, 8 KiB) isend sees it in the receive's CTS record; at or below it
// the message may go to the eager ring before that record comes: its request is not done
// before the record places it, so the sender's test reports it then, and the receiver's test
// reports it too, its buffer left as it was.
void send_larger_than_receive(size_t send_bytes) {
  Board b(2);
  const bool eager = send_bytes <= 8192;
  const std::string want = std::string(eager ? "eager send (written before its receive's CTS) of "
                                             : "isend of ") +
                           std::to_string(send_bytes) + " bytes into a receive of 4096 bytes";
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    if (auto e = warm_up(p, rank); !e.empty()) return e;
    Buf buf(p.a, rank == 0 ? p.send : p.recv, send_bytes);
    if (rank == 1) {
      Handle sent;
      if (eager && !b.get(1, &sent, 30)) return "no word from the sender";
      size_t sz = 4096;
      int tag = 1;
      void* d = buf.data();
      void* mh = buf.mh;
      void* req = nullptr;
      while (!req)
        if (p.a.irecv(p.recv, 1, &d, &sz, &tag, &mh, &req)) return "irecv";
      if (eager) {  // the eager message came first: the receiver's test says so
        int done = 0, r = 0;
        for (const double end = now_s() + 10; r == 0 && !done && now_s() < end;)
          r = p.a.test(req, &done, nullptr);
        if (r != mrcNcclInvalidUsage) return "receiver's test returned " + std::to_string(r);
        if (warnings().back().find("a send of " + std::to_string(send_bytes) +
                                   " bytes into a receive of 4096 bytes") == std::string::npos)
          return "receiver's WARN: " + warnings().back();
        for (size_t i = 0; i < 4096; ++i)
          if (buf.data()[i] != 0) return "the receive buffer was written";
      }
      Handle done;
      b.get(0, &done, 30);  // wait for the sender's verdict before closing
      return "";
    }
    std::memset(buf.data(), 0xab, send_bytes);
    void* req = nullptr;
    int r = 0;
    const double end = now_s() + 10;
    while (!req && r == 0 && now_s() < end)
      r = p.a.isend(p.send, buf.data(), send_bytes, 1, buf.mh, &req);
    if (eager) {
      // No receive posted yet: the message goes to the eager ring at once.
      if (r != 0 || !req) return "eager isend returned " + std::to_string(r) + " and no request";
      Handle h{};
      b.put(1, h);
      int done = 0;
      while (r == 0 && !done && now_s() < end) r = p.a.test(req, &done, nullptr);
      if (done) return "the eager send into a smaller receive completed";
    }
    Handle h{};
    b.put(0, h);
    if (r != mrcNcclInvalidUsage)
      return "isend of " + std::to_string(send_bytes) + " B into 4096 B returned " +
             std::to_string(r);
    if (warnings().back().find(want) == std::string::npos) return "WARN: " + warnings().back();
    return "";
  });
  EXPECT_EQ(err, "");
}

TEST(NcclTransfer, SendLargerThanReceive_IsAnError) { send_larger_than_receive(16384); }

TEST(NcclTransfer, SendLargerThanReceive_Eager_BothSidesSayIt) { send_larger_than_receive(8192); }

// 8 eager sends wait to be placed while the receiver, having copied them, posts 32 more
// receives (40 in all, 32 in flight at once): the sender then reads 40 CTS records at once,
// the 33rd for the slot of the 1st, whose eager send it places first (net.h). Then 32 sends
// of mixed sizes fill the rest; every size and byte checked.
TEST(NcclTransfer, EagerSends_PlacedWhenTheReceiveWindowWraps) {
  Board b(2);
  constexpr size_t kN = 40, kBuf = 20480;
  auto size_of = [](size_t i) { return i < 8 ? 1 + i * 1000 : (i * 997) % 20000; };
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    if (auto e = warm_up(p, rank); !e.empty()) return e;
    {
      Buf buf(p.a, rank == 0 ? p.send : p.recv, kN * kBuf);
      if (!buf.mh) return "regMr failed";
      std::vector<void*> reqs(kN, nullptr);
      Handle h{};
      if (rank == 0) {
        for (size_t i = 0; i < kN; ++i) fill(buf.data() + i * kBuf, size_of(i), i);
        for (size_t i = 0; i < 8; ++i)
          if (p.a.isend(p.send, buf.data() + i * kBuf, size_of(i), 7, buf.mh, &reqs[i]) ||
              !reqs[i])
            return "eager isend " + std::to_string(i);
        b.put(0, h);
        if (!b.get(1, &h, 30)) return "no word from the receiver";
        for (size_t i = 8; i < kN; ++i)
          while (!reqs[i])
            if (int r = p.a.isend(p.send, buf.data() + i * kBuf, size_of(i), 7, buf.mh, &reqs[i]))
              return "isend " + std::to_string(i) + " returned " + std::to_string(r) + last_warn();
        for (size_t i = 0; i < kN; ++i)
          if (int r = wait_test(p.a, reqs[i], nullptr))
            return "test send " + std::to_string(i) + " returned " + std::to_string(r) +
                   last_warn();
      } else {
        if (!b.get(0, &h, 30)) return "no word from the sender";
        auto post = [&](size_t i) -> std::string {
          size_t sz = kBuf;
          int tag = 7;
          void* d = buf.data() + i * kBuf;
          void* mh = buf.mh;
          while (!reqs[i])
            if (p.a.irecv(p.recv, 1, &d, &sz, &tag, &mh, &reqs[i])) return "irecv";
          return "";
        };
        auto check = [&](size_t i) -> std::string {
          int got = -1;
          if (int r = wait_test(p.a, reqs[i], &got))
            return "test recv " + std::to_string(i) + " returned " + std::to_string(r);
          if (got != static_cast<int>(size_of(i)))
            return "message " + std::to_string(i) + ": size " + std::to_string(got);
          return verify(buf.data() + i * kBuf, size_of(i), i);
        };
        for (size_t i = 0; i < 32; ++i)
          if (auto e = post(i); !e.empty()) return e;
        for (size_t i = 0; i < 8; ++i)
          if (auto e = check(i); !e.empty()) return e;
        for (size_t i = 32; i < kN; ++i)
          if (auto e = post(i); !e.empty()) return e;
        b.put(1, h);
        for (size_t i = 8; i < kN; ++i)
          if (auto e = check(i); !e.empty()) return e;
      }
    }
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// A receiver that closes before posting the receive for an eager send it holds: the sender's
// test() says so (RemoteError), it does not report the send done.
TEST(NcclTransfer, EagerSend_PeerClosesWithoutItsReceive_IsAnError) {
  Board b(2);
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    if (auto e = warm_up(p, rank); !e.empty()) return e;
    Handle h{};
    if (rank == 1) {
      if (!b.get(0, &h, 30)) return "no word from the sender";
      const double until = now_s() + 0.05;  // the message lands and is acknowledged
      while (now_s() < until) {
      }
      auto e = close_pair(p);
      b.put(1, h);
      return e;
    }
    Buf buf(p.a, p.send, 8);
    void* req = nullptr;
    if (p.a.isend(p.send, buf.data(), 8, 7, buf.mh, &req) || !req) return "eager isend";
    b.put(0, h);
    if (!b.get(1, &h, 30)) return "no word from the receiver";
    int done = 0, r = 0;
    for (const double end = now_s() + 10; r == 0 && !done && now_s() < end;)
      r = p.a.test(req, &done, nullptr);
    if (done) return "the eager send completed; its receive was never posted";
    if (r != mrcNcclRemoteError) return "test returned " + std::to_string(r);
    // The receiver waits 50 ms for the message to land before it closes; on a machine too busy
    // for that, the send was still unacknowledged when the peer went, and says so instead.
    const std::string& w = warnings().back();
    if (w.find("before posting the receive for an eager send") == std::string::npos &&
        w.find("with this request outstanding") == std::string::npos)
      return "WARN: " + w;
    return "";
  });
  EXPECT_EQ(err, "");
}

// A connection that has seen a grouped receive sends nothing eagerly: the sends of a group may
// come in any order of tags, which only the receive's CTS record sorts out.
TEST(NcclTransfer, EagerSends_NotAfterAGroupedReceive) {
  Board b(2);
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    auto buf_p = std::make_unique<Buf>(p.a, rank == 0 ? p.send : p.recv, 3 * 64);
    Buf& buf = *buf_p;  // deregistered before the comm closes
    Handle h{};
    if (rank == 1) {
      void* d[2] = {buf.data(), buf.data() + 64};
      size_t sz[2] = {64, 64};
      int tags[2] = {1, 2};
      void* mh[2] = {buf.mh, buf.mh};
      void* req = nullptr;
      while (!req)
        if (p.a.irecv(p.recv, 2, d, sz, tags, mh, &req)) return "irecv";
      int got[2];
      if (wait_test(p.a, req, got)) return "test grouped";
      if (!b.get(0, &h, 30)) return "no word from the sender";
      void* d1 = buf.data() + 128;
      size_t sz1 = 64;
      int tag1 = 1;
      void* mh1 = buf.mh;
      req = nullptr;
      while (!req)
        if (p.a.irecv(p.recv, 1, &d1, &sz1, &tag1, &mh1, &req)) return "irecv";
      int got1 = 0;
      if (wait_test(p.a, req, &got1) || got1 != 8) return "test single";
      buf_p.reset();
      return close_pair(p);
    }
    for (int tag : {2, 1}) {  // the group's tags in the other order
      void* req = nullptr;
      while (!req)
        if (p.a.isend(p.send, buf.data(), 8, tag, buf.mh, &req)) return "isend grouped";
      if (wait_test(p.a, req, nullptr)) return "test grouped send";
    }
    void* req = nullptr;
    for (const double end = now_s() + 0.05; now_s() < end;) {
      if (p.a.isend(p.send, buf.data(), 8, 1, buf.mh, &req)) return "isend";
      if (req) return "an eager send after a grouped receive";
    }
    b.put(0, h);
    while (!req)
      if (p.a.isend(p.send, buf.data(), 8, 1, buf.mh, &req)) return "isend";
    if (wait_test(p.a, req, nullptr)) return "test send";
    buf_p.reset();
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

TEST(NcclTransfer, CloseWithRequestsInFlight_ThenConnectAgain) {
  Board b(1);
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    {
      Buf buf(p.a, rank == 0 ? p.send : p.recv, 32 << 20);
      for (int i = 0; i < 16; ++i) {
        void* req = nullptr;
        size_t sz = 2 << 20;
        int tag = 0;
        void* d = buf.data() + (size_t{2} << 20) * i;
        void* mh = buf.mh;
        const int r = rank == 1 ? p.a.irecv(p.recv, 1, &d, &sz, &tag, &mh, &req)
                                : p.a.isend(p.send, d, sz, 0, buf.mh, &req);
        if (r == mrcNcclRemoteError) break;  // the peer closed first: that is what it says
        if (r) return "post returned " + std::to_string(r);
      }
      const int r = rank == 0 ? p.a.close_send(p.send) : p.a.close_recv(p.recv);
      if (r) return "close with requests in flight returned " + std::to_string(r);
      p.send = p.recv = nullptr;
    }
    // The listen comm, its handle and the plugin stay usable.
    if (rank == 1) {
      if (auto e = wait_accept(p.a, p.listen, &p.recv); !e.empty()) return "second accept: " + e;
    } else {
      if (auto e = wait_connect(p.a, p.handle, &p.send); !e.empty()) return "second connect: " + e;
    }
    if (auto e = transfer(p, rank, {1, 1 << 20, 12345}, 2); !e.empty()) return "after close: " + e;
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// One listen comm takes connections one after another, each used and closed before the next.
TEST(NcclTransfer, ReuseListenComm) {
  Board b(1);
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    for (int round = 0; round < 5; ++round) {
      if (round > 0) {
        auto e =
            rank == 1 ? wait_accept(p.a, p.listen, &p.recv) : wait_connect(p.a, p.handle, &p.send);
        if (!e.empty()) return "round " + std::to_string(round) + ": " + e;
      }
      if (auto e = transfer(p, rank, {100, 200000}, 2); !e.empty()) return e;
      // The receiver waits for the sender's last completion before closing, so both finish.
      if (rank == 0)
        p.a.close_send(p.send);
      else
        p.a.close_recv(p.recv);
      p.send = p.recv = nullptr;
    }
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// Strangers at the listener's control port (a port scan, a stale peer, junk): they cost the
// listen comm a socket for a while, never a QP, and never fail it; past 256 waiting ones the
// oldest silent one is closed. The real peer, connecting after 320 of them, gets through.
TEST(NcclTransfer, StrangersAtTheListener_NeverFailIt) {
  Board b(1);
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (rank == 1) {
      if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return "the listener: " + e;
      // The device's QPs (its statistics segment): the real comm's only, none for strangers.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      size_t qps = 0;
      for (const auto& snap : observe::read_all(::getpid())) qps += snap.qps.size();
      if (qps != 1) return "the listener has " + std::to_string(qps) + " QPs, not 1";
    } else {
      if (!pl.lib) return "dlopen: " + pl.error;
      p.a = pl.api(12);
      if (int r = p.a.init()) return "init returned " + std::to_string(r);
      if (!b.get(0, &p.handle)) return "no handle from the listener";
      // The handle's control address (docs/nccl-plugin.md: after magic, version and device).
      sockaddr_in6 to{};
      std::memcpy(&to, p.handle.data() + 8, sizeof to);
      std::vector<int> fds;
      for (int i = 0; i < 320; ++i) {
        const bool junk = i < 20;  // the first ones talk nonsense, the rest stay silent
        const int fd = ::socket(AF_INET6, SOCK_STREAM | (junk ? 0 : SOCK_NONBLOCK), 0);
        if (fd < 0) return "socket failed";
        fds.push_back(fd);
        const int r = ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
        if (junk) {
          if (r != 0) return "a stranger could not connect at all";
          const char garbage[] = "GET / HTTP/1.0\r\n\r\nnot a frame at all, not even close";
          (void)!::write(fd, garbage, sizeof garbage);
        }
      }
      auto e = wait_connect(p.a, p.handle, &p.send);
      for (int fd : fds) ::close(fd);
      if (!e.empty()) return "the real peer, after the strangers: " + e;
    }
    if (auto e = transfer(p, rank, {1, 100000}, 2); !e.empty()) return e;
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// Many comms between two processes at once (NCCL opens one per channel and peer), all busy.
TEST(NcclTransfer, ManyCommsAtOnce) {
  Board b(1);
  constexpr int kComms = 48;
  const std::string err = run_ranks(ranks(2), [&](int rank) -> std::string {
    Plugin pl;
    Pair p;
    if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
    std::vector<void*> comms{rank == 0 ? p.send : p.recv};
    std::vector<Handle> handles(kComms, p.handle);  // one copy per connect in progress
    std::vector<void*> pending(kComms, nullptr);
    const double end = now_s() + 30;
    while (comms.size() < static_cast<size_t>(kComms) && now_s() < end) {
      void* c = nullptr;
      if (rank == 1) {
        if (p.a.accept(p.listen, &c)) return "accept";
        if (c) comms.push_back(c);
      } else {
        for (size_t i = comms.size(); i < static_cast<size_t>(kComms); ++i) {
          if (pending[i]) continue;
          if (p.a.connect(0, handles[i].data(), &pending[i])) return "connect";
        }
        for (size_t i = comms.size(); i < static_cast<size_t>(kComms) && pending[i]; ++i)
          comms.push_back(pending[i]);
      }
    }
    if (comms.size() != static_cast<size_t>(kComms))
      return "only " + std::to_string(comms.size()) + " comms";
    constexpr size_t kSize = 256 << 10;
    std::vector<std::unique_ptr<Buf>> bufs;
    std::vector<void*> reqs(kComms, nullptr);
    for (int i = 0; i < kComms; ++i) {
      bufs.push_back(std::make_unique<Buf>(p.a, comms[i], kSize));
      if (rank == 0) fill(bufs[i]->data(), kSize, 500 + i);
    }
    // Accept order may differ from connect order: the tag says which comm sent it.
    for (int i = 0; i < kComms; ++i) {
      while (!reqs[i]) {
        int r;
        if (rank == 0) {
          r = p.a.isend(comms[i], bufs[i]->data(), kSize, 0, bufs[i]->mh, &reqs[i]);
        } else {
          size_t sz = kSize;
          int tag = 0;
          void* d = bufs[i]->data();
          void* mh = bufs[i]->mh;
          r = p.a.irecv(comms[i], 1, &d, &sz, &tag, &mh, &reqs[i]);
        }
        if (r) return "post on comm " + std::to_string(i);
      }
    }
    std::vector<bool> seen(kComms, false);
    for (int i = 0; i < kComms; ++i) {
      int got = 0;
      if (int r = wait_test(p.a, reqs[i], &got))
        return "test on comm " + std::to_string(i) + ": " + std::to_string(r);
      if (rank == 1) {
        bool ok = false;
        for (int s = 0; s < kComms && !ok; ++s)
          if (!seen[s] && verify(bufs[i]->data(), kSize, 500 + s).empty()) ok = seen[s] = true;
        if (!ok) return "comm " + std::to_string(i) + " received bytes no sender sent";
      }
    }
    bufs.clear();
    for (size_t i = 1; i < comms.size(); ++i)
      rank == 0 ? p.a.close_send(comms[i]) : p.a.close_recv(comms[i]);
    return close_pair(p);
  });
  EXPECT_EQ(err, "");
}

// A peer killed mid-transfer: the survivor's test() returns an error promptly, not a hang.
// Both directions: the receiver dies under a sender, the sender under a receiver.
TEST(NcclTransfer, KilledPeer_TestReturnsAnErrorPromptly) {
  for (int victim = 0; victim < 2; ++victim) {
    Board b(2);
    std::vector<RankSpec> rs = ranks(2);
    rs[victim].expect_killed = true;
    const std::string err = run_ranks(rs, [&](int rank) -> std::string {
      Plugin pl;
      Pair p;
      if (auto e = pair_up(pl, b, rank, &p); !e.empty()) return e;
      Buf buf(p.a, rank == 0 ? p.send : p.recv, 64 << 20);
      if (auto e = transfer(p, rank, {1 << 20, 1 << 20}, 2); !e.empty()) return "warm-up: " + e;
      // The sender's request stays in flight: it needs the receiver's CTS and then ACKs; the
      // receiver's stays in flight until data comes. If the receiver dies before its CTS left,
      // the sender's isend itself reports the error.
      auto post = [&](void** req) {
        int post_error = 0;
        const double end = now_s() + 10;
        while (!*req && !post_error && now_s() < end) {
          size_t sz = 64 << 20;
          int tag = 0;
          void* d = buf.data();
          void* mh = buf.mh;
          post_error = rank == 1 ? p.a.irecv(p.recv, 1, &d, &sz, &tag, &mh, req)
                                 : p.a.isend(p.send, buf.data(), 64 << 20, 0, buf.mh, req);
        }
        return post_error;
      };
      void* req = nullptr;
      int post_error = post(&req);
      if (post_error && rank == victim) return "post returned " + std::to_string(post_error);
      if (rank == victim) {
        const double t = now_s();
        b.put(1, t);
        ::raise(SIGKILL);  // this process only
      }
      int got = 0;
      int r = post_error ? post_error : wait_test(p.a, req, &got, 10);
      if (r == 0) {
        // The whole 64 MiB crossed before the kill landed (it can on an idle machine, either
        // way round): the message was whole, so the next one must fail.
        req = nullptr;
        post_error = post(&req);
        if (!post_error && !req) return "the next post neither took nor failed in 10 s";
        r = post_error ? post_error : wait_test(p.a, req, &got, 10);
      }
      const double noticed = now_s();
      double killed_at = 0;
      if (!b.get(1, &killed_at, 1)) return "no kill time";
      if (r == 0) return "a second message completed although the peer was dead";
      if (r == -1) return "test() still pending 10 s after the peer was killed";
      if (r != mrcNcclRemoteError)
        return "test() returned " + std::to_string(r) + ", want RemoteError";
      if (noticed - killed_at > 2.0)
        return "error only after " + std::to_string(noticed - killed_at) + " s";
      if (warnings().empty() ||
          warnings().back().find("closed the connection") == std::string::npos)
        return "WARN: " + (warnings().empty() ? std::string("none") : warnings().back());
      return "";
    });
    EXPECT_EQ(err, "") << "victim: rank " << victim;
  }
}

}  // namespace
}  // namespace mrc::nccl::harness

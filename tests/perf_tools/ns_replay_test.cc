// An on-path attacker who KNOWS the connection's token, on the namespace fabric: while host 0
// streams verified RDMA WRITEs to host 1, an AF_PACKET socket in host 1's plane-0 T0 switch
// captures the real MRC datagrams (learning QPNs, tokens, EVs and PSNs), and host 2 sends
// replays and rewrites of them with valid header and payload CRCs. Threading: the test thread
// runs the session; a capture thread and an attack thread share the captured state under a
// mutex. Skips (saying why) where namespaces cannot be made.
//
// What the attacker sends, and what the endpoints must do with it:
//   replays      captured data packets, byte for byte, well after they were acknowledged, and
//                rewritten far into the past: the receiver drops them as kDuplicate (re-ACKs,
//                never places them again; a second placement would land on a reused slot of
//                the WRITE ring and fail the byte check).
//   far PSNs     captured data packets rewritten 2^20 PSNs ahead: the receiver drops them as
//                kPsnOutOfWindow and NACKs; the sender drops that NACK as kBadAck (it names a
//                PSN it never sent).
//   forged ACKs  cumulative PSN 2^24 past anything sent: the sender drops them as kBadAck.
//   forged NACKs for PSNs never sent: kBadAck. For real (captured) PSNs with reasons TRIMMED and
//                PSN_OUT_OF_WINDOW: honoured, i.e. the packet is resent (and its window cut).
//   probe replies for an EV the QP does not have: kBadAck; for its real EVs: accepted and
//                ignored unless the EV is being probed.
//   a flood      of small far-PSN data packets and never-sent NACKs for the last part of the
//                run: memory (VmRSS) stays flat, the NACK queue is capped.
// The transfer must stay byte-exact with zero error completions, and the wrong-token and
// unknown-QP counters stay at zero (the forgeries passed the token check: they reached the
// PSN and ACK checks, which is what this test is about).
//
// What an attacker with the token CAN do (the protocol, like RoCE without IPsec, authenticates
// nothing beyond the token; this test does not send these, since they succeed by design):
//   - kill the QP: a NACK with REMOTE_ACCESS/REMOTE_INVALID/REMOTE_OPERATION for an in-flight
//     PSN fails the WR and moves the QP to ERROR;
//   - lose data silently: an ACK whose cumulative PSN covers PSNs in flight but not yet
//     delivered makes the sender free them, and the receiver waits for them forever;
//   - corrupt data: a data packet for a PSN inside the receive window that has not arrived yet
//     is placed, and the real one is then dropped as a duplicate (a forged READ request or
//     SEND takes a PSN the same way); a WRITE may target any address the peer's remotely
//     writable MRs cover;
//   - slow the connection: forged NACKs (resends, window cuts), probe replies that keep a dead
//     EV in use, echoed timestamps that inflate the RTT estimate.
// What it CANNOT do (asserted here): make a PSN be placed twice, make the receiver accept a
// PSN outside its window or grow its state with one, make the sender act on a PSN it never
// sent, or grow either endpoint's memory by flooding.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "mrc/common/netns.h"
#include "mrc/engine/stats.h"
#include "mrc/wire/wire.h"
#include "ns_handle.h"
#include "ns_test_fabric.h"

namespace mrc::perf {
namespace {

using engine::Drop;
using Clock = std::chrono::steady_clock;

sockaddr_in6 to(const srv6::Ipv6& a) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  s.sin6_port = htons(io::kDefaultUdpPort);
  std::memcpy(&s.sin6_addr, a.data(), a.size());
  return s;
}

// What the capture thread learned from the connection, under `mu`.
struct Captured {
  std::mutex mu;
  bool have_data = false, have_ack = false;
  uint32_t srv_qpn = 0, srv_token = 0;  // from data packets (client -> server)
  uint32_t cli_qpn = 0, cli_token = 0;  // from ACKs (server -> client)
  uint32_t newest_psn = 0;              // highest data PSN seen (PSNs start at 0 here)
  std::vector<uint32_t> evs;            // data EVs seen
  struct Dgram {
    Clock::time_point at;
    std::vector<uint8_t> bytes;  // one whole MRC datagram
    bool replayed = false;
  };
  std::deque<Dgram> data;  // a sample of data packets, newest last, bounded
  uint64_t datagrams = 0;  // MRC packets seen
};

constexpr size_t kMaxKept = 512;  // ~2 MiB of sampled data packets

// The MRC packets in one captured IPv6 packet (network header on, as SOCK_DGRAM gives it),
// unless it comes from one of `skip` (the attacker's own addresses).
void parse_ipv6(const uint8_t* b, size_t n, const std::vector<srv6::Ipv6>& skip, Captured& cap,
                uint64_t* sample) {
  if (n < 40 || (b[0] >> 4) != 6) return;
  for (const srv6::Ipv6& a : skip)
    if (std::memcmp(b + 8, a.data(), a.size()) == 0) return;
  uint8_t nh = b[6];
  size_t off = 40;
  while (nh == 0 || nh == 43 || nh == 60) {  // hop-by-hop, routing (SRH), destination options
    if (off + 8 > n) return;
    const uint8_t next = b[off];
    off += (size_t{b[off + 1]} + 1) * 8;
    nh = next;
  }
  if (nh != 17 || off + 8 > n) return;
  const uint16_t sport = static_cast<uint16_t>(b[off] << 8 | b[off + 1]);
  const uint16_t dport = static_cast<uint16_t>(b[off + 2] << 8 | b[off + 3]);
  if (sport != io::kDefaultUdpPort && dport != io::kDefaultUdpPort) return;
  std::span<const uint8_t> rest(b + off + 8, n - off - 8);
  // Normally one MRC packet per UDP datagram; walk a coalesced run too (each whole).
  while (rest.size() >= wire::kCommonSize) {
    const auto kind = static_cast<wire::Kind>(rest[1]);
    const size_t hs = wire::header_size(kind);
    if (hs == 0 || hs > rest.size()) return;
    auto hdr = wire::decode(rest.first(hs));  // a data header alone decodes as trimmed
    if (!hdr.ok()) return;
    const size_t len = hs + (wire::is_data(kind) ? hdr->data.payload_len : 0);
    if (len > rest.size()) return;
    auto p = wire::decode(rest.first(len));
    if (!p.ok()) return;
    std::lock_guard lock(cap.mu);
    ++cap.datagrams;
    if (p->common.kind == wire::Kind::kWrite) {
      cap.have_data = true;
      cap.srv_qpn = p->common.dst_qpn;
      cap.srv_token = p->common.token;
      if (static_cast<int32_t>(p->common.psn - cap.newest_psn) > 0) cap.newest_psn = p->common.psn;
      if (std::find(cap.evs.begin(), cap.evs.end(), p->common.ev) == cap.evs.end())
        cap.evs.push_back(p->common.ev);
      if ((*sample)++ % 16 == 0) {
        cap.data.push_back({Clock::now(), std::vector<uint8_t>(rest.begin(), rest.begin() + len)});
        if (cap.data.size() > kMaxKept) cap.data.pop_front();
      }
    } else if (p->common.kind == wire::Kind::kAck) {
      cap.have_ack = true;
      cap.cli_qpn = p->common.dst_qpn;
      cap.cli_token = p->common.token;
    }
    rest = rest.subspan(len);
  }
}

void capture(int fd, std::vector<srv6::Ipv6> skip, Captured& cap, const std::atomic<bool>& stop) {
  std::vector<uint8_t> buf(65536 + 256);
  uint64_t sample = 0;
  while (!stop.load()) {
    sockaddr_ll from{};
    socklen_t fl = sizeof from;
    const ssize_t n =
        ::recvfrom(fd, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &fl);
    if (n <= 0) continue;                               // timeout: look at `stop`
    if (from.sll_pkttype == PACKET_OUTGOING) continue;  // each packet once: as it comes in
    parse_ipv6(buf.data(), static_cast<size_t>(n), skip, cap, &sample);
  }
}

// What the attacker sent, by kind.
struct Sent {
  uint64_t replays = 0;      // verbatim, old
  uint64_t rewound = 0;      // PSN moved 2^20 into the past
  uint64_t far_psn = 0;      // PSN 2^20 ahead
  uint64_t never_acks = 0;   // ACK cum 2^24 ahead
  uint64_t never_nacks = 0;  // NACK of a PSN 2^24 ahead
  uint64_t real_nacks = 0;   // NACK of a captured PSN (TRIMMED / PSN_OUT_OF_WINDOW)
  uint64_t bogus_probe_replies = 0;
  uint64_t real_probe_replies = 0;
  uint64_t flood = 0;   // flood phase: far-PSN data + never-sent NACKs
  uint64_t errors = 0;  // sendto failures
};

void attack(int fd, sockaddr_in6 server, sockaddr_in6 client, Captured& cap,
            const std::atomic<bool>& stop, Clock::time_point flood_from, Sent* sent) {
  std::mt19937_64 rng(11);
  std::vector<uint8_t> out(9000);
  auto send = [&](const sockaddr_in6& dst, size_t len, uint64_t* counter) {
    if (::sendto(fd, out.data(), len, 0, reinterpret_cast<const sockaddr*>(&dst), sizeof dst) >= 0)
      ++*counter;
    else
      ++sent->errors;
  };
  // A data packet `d` rewritten with PSN `psn` and (when set) a shorter payload, CRCs valid.
  auto rewrite_data = [&](const std::vector<uint8_t>& d, uint32_t psn, size_t max_payload) {
    auto p = wire::decode(d);
    if (!p.ok()) return size_t{0};
    p->common.psn = psn;
    std::vector<uint8_t> payload(p->payload.begin(), p->payload.end());
    if (payload.size() > max_payload) payload.resize(max_payload);
    p->data.payload_len = static_cast<uint16_t>(payload.size());
    const size_t h = wire::encode_header(*p, payload, out);
    std::copy(payload.begin(), payload.end(), out.begin() + static_cast<ptrdiff_t>(h));
    return h + payload.size();
  };
  auto control = [&](wire::Kind kind, uint32_t qpn, uint32_t token, uint32_t ev) {
    wire::Packet p;
    p.common.kind = kind;
    p.common.dst_qpn = qpn;
    p.common.token = token;
    p.common.ev = ev;
    return p;
  };

  while (!stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::vector<uint8_t> replay, newest;
    uint32_t cli_qpn, cli_token, top, ev;
    {
      std::lock_guard lock(cap.mu);
      if (!cap.have_data || !cap.have_ack || cap.data.empty()) continue;
      cli_qpn = cap.cli_qpn;
      cli_token = cap.cli_token;
      top = cap.newest_psn;
      ev = cap.evs[rng() % cap.evs.size()];
      newest = cap.data.back().bytes;
      // The oldest sample not yet replayed that was captured at least 200 ms ago: long
      // acknowledged by now.
      for (auto& d : cap.data) {
        if (Clock::now() - d.at < std::chrono::milliseconds(200)) break;
        if (!d.replayed) {
          d.replayed = true;
          replay = d.bytes;
          break;
        }
      }
    }
    const uint32_t real_psn = wire::decode(newest)->common.psn;

    if (!replay.empty()) {  // verbatim, then the same packet 2^20 PSNs in the past
      std::copy(replay.begin(), replay.end(), out.begin());
      send(server, replay.size(), &sent->replays);
      const uint32_t old = wire::decode(replay)->common.psn;
      if (size_t n = rewrite_data(replay, old - (1u << 20), 4096)) send(server, n, &sent->rewound);
    }
    if (size_t n =
            rewrite_data(newest, top + (1u << 20) + static_cast<uint32_t>(rng() % 65536), 4096))
      send(server, n, &sent->far_psn);
    {
      wire::Packet a = control(wire::Kind::kAck, cli_qpn, cli_token, ev);
      a.ack.cum_psn = top + (1u << 24);
      a.ack.sack_base = a.ack.cum_psn;
      a.ack.echo_ev = ev;
      a.ack.echo_psn = real_psn;
      send(client, wire::encode_header(a, {}, out), &sent->never_acks);
    }
    {
      wire::Packet n = control(wire::Kind::kNack, cli_qpn, cli_token, ev);
      n.nack.nack_psn = top + (1u << 24);
      n.nack.cum_psn = real_psn - (1u << 20);  // far behind: acknowledges nothing
      n.nack.reason = wire::NackReason::kTrimmed;
      send(client, wire::encode_header(n, {}, out), &sent->never_nacks);
    }
    if (rng() % 4 == 0) {  // ~125/s: each costs the sender a resend and a window cut
      wire::Packet n = control(wire::Kind::kNack, cli_qpn, cli_token, ev);
      n.nack.nack_psn = real_psn;
      n.nack.cum_psn = real_psn - (1u << 20);
      n.nack.echo_ev = ev;
      n.nack.reason = rng() % 2 ? wire::NackReason::kTrimmed : wire::NackReason::kPsnOutOfWindow;
      send(client, wire::encode_header(n, {}, out), &sent->real_nacks);
    }
    {
      wire::Packet r = control(wire::Kind::kProbeReply, cli_qpn, cli_token, ev);
      r.common.psn = static_cast<uint32_t>(rng() % 64);
      r.probe_reply.echo_ev = ev;
      send(client, wire::encode_header(r, {}, out), &sent->real_probe_replies);
      r.probe_reply.echo_ev = 0xdead0000u | static_cast<uint32_t>(rng() & 0xffff);  // no such EV
      send(client, wire::encode_header(r, {}, out), &sent->bogus_probe_replies);
    }
    if (Clock::now() >= flood_from) {
      for (int i = 0; i < 32; ++i) {
        if (size_t n =
                rewrite_data(newest, top + (1u << 20) + static_cast<uint32_t>(rng() % 65536), 64))
          send(server, n, &sent->flood);
        wire::Packet k = control(wire::Kind::kNack, cli_qpn, cli_token, ev);
        k.nack.nack_psn = top + (1u << 24) + static_cast<uint32_t>(i);
        k.nack.cum_psn = real_psn - (1u << 20);
        k.nack.reason = wire::NackReason::kPsnOutOfWindow;
        send(client, wire::encode_header(k, {}, out), &sent->flood);
      }
    }
  }
}

TEST(NsReplay, RightTokenReplaysForgedAcksNacksProbeReplies_TransferIntactDropsCounted) {
  if (auto ok = mrc::netns_supported(); !ok.ok()) GTEST_SKIP() << ok.error();
  auto up = make_test_fabric("h8r", 3, /*gso=*/false);
  ASSERT_TRUE(up.ok()) << up.error();
  nsfabric::NsFabric fab = std::move(up).value();
  struct Down {
    nsfabric::NsFabric& f;
    ~Down() { EXPECT_TRUE(f.down().ok()); }
  } down{fab};

  // The tap: every IPv6 packet through host 1's plane-0 T0 (both directions of the stream).
  const srv6::SwitchId t0{srv6::Tier::kT0, 0, fab.fabric().t0_of(1)};
  auto tap = mrc::in_netns(fab.switch_netns(t0), [&]() -> Result<int, std::string> {
    const int s = ::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IPV6));
    if (s < 0) return Err(std::string("AF_PACKET socket: ") + std::strerror(errno));
    timeval tv{0, 50'000};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const int rcvbuf = 8 << 20;
    ::setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    return s;
  });
  ASSERT_TRUE(tap.ok()) << tap.error();
  // The sender of forgeries: host 2, a third host on the fabric.
  auto fd = mrc::in_netns(fab.host_netns(2), [&]() -> Result<int, std::string> {
    const int s = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return Err(std::string("socket: ") + std::strerror(errno));
    return s;
  });
  if (!fd.ok()) ::close(*tap);
  ASSERT_TRUE(fd.ok()) << fd.error();

  const double duration_s = 4.0;
  Captured cap;
  Sent sent;
  std::atomic<bool> stop{false};
  const auto flood_from = Clock::now() + std::chrono::milliseconds(2500);
  const std::vector<srv6::Ipv6> attacker_addrs = {fab.fabric().host_address(2, 0),
                                                  fab.fabric().host_address(2, 1)};
  std::thread capturer(capture, *tap, attacker_addrs, std::ref(cap), std::cref(stop));
  std::thread attacker(attack, *fd, to(fab.fabric().host_address(1, 0)),
                       to(fab.fabric().host_address(0, 0)), std::ref(cap), std::cref(stop),
                       flood_from, &sent);
  struct Join {  // also when an assertion below returns early
    std::atomic<bool>& stop;
    std::thread &a, &b;
    int fds[2];
    ~Join() {
      stop = true;
      if (a.joinable()) a.join();
      if (b.joinable()) b.join();
      for (int f : fds) ::close(f);
    }
  } join{stop, capturer, attacker, {*tap, *fd}};

  const FabricHandle h = fabric_handle(fab);
  SessionOptions so;
  so.msg_bytes = 256 << 10;
  so.duration_s = duration_s;
  so.gso = false;  // one MRC packet per IPv6 packet on the wire, as the tap reads them
  so.quiet = true;
  auto r = run_session(h, so);
  stop = true;
  capturer.join();
  attacker.join();
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r->mrc.has_value());
  const MrcRunResult& m = *r->mrc;
  const engine::EngineStats& srv = m.server_engine;
  const engine::EngineStats& cli = m.client_engine;

  std::printf(
      "tap saw %llu MRC packets; sent: %llu replays, %llu rewound, %llu far-PSN, %llu never-sent "
      "ACKs, %llu never-sent NACKs, %llu real NACKs, %llu+%llu probe replies, %llu flood, %llu "
      "send errors\n",
      (unsigned long long)cap.datagrams, (unsigned long long)sent.replays,
      (unsigned long long)sent.rewound, (unsigned long long)sent.far_psn,
      (unsigned long long)sent.never_acks, (unsigned long long)sent.never_nacks,
      (unsigned long long)sent.real_nacks, (unsigned long long)sent.real_probe_replies,
      (unsigned long long)sent.bogus_probe_replies, (unsigned long long)sent.flood,
      (unsigned long long)sent.errors);
  auto show = [](const char* who, const engine::EngineStats& st) {
    std::printf("%s drops:", who);
    for (size_t i = 0; i < st.drops.size(); ++i)
      if (st.drops[i])
        std::printf(" %s %llu", to_string(static_cast<Drop>(i)), (unsigned long long)st.drops[i]);
    std::printf("\n");
  };
  show("server", srv);
  show("client", cli);
  std::printf("messages %llu, retransmits %llu, VmRSS start %llu KiB, max %llu KiB, end %llu KiB\n",
              (unsigned long long)m.messages, (unsigned long long)m.retransmits,
              (unsigned long long)m.rss_start_kib, (unsigned long long)m.rss_max_kib,
              (unsigned long long)m.rss_end_kib);

  // The transfer: byte-exact, no error completion.
  EXPECT_TRUE(r->data_ok) << r->first_error;
  EXPECT_EQ(m.mismatches, 0u);
  EXPECT_EQ(m.errors, 0u) << m.first_error;
  EXPECT_GT(m.messages, 20u);

  // The attack happened, with what the tap learned (both QPs and their tokens).
  EXPECT_TRUE(cap.have_data && cap.have_ack);
  EXPECT_NE(cap.srv_token, 0u);
  EXPECT_NE(cap.cli_token, 0u);
  EXPECT_GT(sent.replays, 100u);
  EXPECT_GT(sent.far_psn, 300u);
  EXPECT_GT(sent.never_acks, 300u);
  EXPECT_GT(sent.flood, 5000u);
  // Every forgery carried the right token to the right QP.
  EXPECT_EQ(srv.dropped(Drop::kBadToken) + cli.dropped(Drop::kBadToken), 0u);
  EXPECT_EQ(srv.dropped(Drop::kUnknownQp) + cli.dropped(Drop::kUnknownQp), 0u);
  EXPECT_EQ(srv.dropped(Drop::kMalformed) + cli.dropped(Drop::kMalformed), 0u);
  // Each endpoint counted them under the right reason. Slack of half: the fabric's shaped
  // ports (1 Gbit/s, busy with the stream) may drop some of them on the way.
  EXPECT_GE(srv.dropped(Drop::kDuplicate), (sent.replays + sent.rewound) / 2);
  EXPECT_GE(srv.dropped(Drop::kPsnOutOfWindow), sent.far_psn / 2);
  EXPECT_GE(cli.dropped(Drop::kBadAck),
            (sent.never_acks + sent.never_nacks + sent.bogus_probe_replies) / 2);
  // Nothing an attacker sends to a requester is data it would place; nothing sent to the
  // responder is an ACK: the sides' counters stay apart.
  EXPECT_EQ(cli.dropped(Drop::kPsnOutOfWindow), 0u);
  EXPECT_EQ(srv.dropped(Drop::kBadAck), 0u);
  EXPECT_EQ(srv.dropped(Drop::kRemoteAccess), 0u);

  // Memory: the flood (tens of thousands of datagrams a second for the last seconds) leaves
  // the process's resident memory where it was, within a generous 32 MiB.
  EXPECT_GT(m.rss_start_kib, 0u);
#ifndef MRC_TEST_ASAN
  EXPECT_LT(m.rss_max_kib, m.rss_start_kib + 32 * 1024);
#else
  std::printf("VmRSS not checked under AddressSanitizer (its quarantine holds freed memory)\n");
#endif
}

}  // namespace
}  // namespace mrc::perf

// Tests of tools/mrcctl/view.cc on made-up snapshots: the JSON documents (shape and values),
// event following, EV names, tables, and the Prometheus exposition parsed strictly.
#include "view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "expect.h"
#include "mrc/engine/paths.h"

namespace mrc::mrcctl {
namespace {

using namespace testing;

Snapshot make_snapshot() {
  Snapshot s;
  s.name = "/mrc-stats.42.0";
  s.pid = 42;
  s.generation = 7;
  s.published_ns = 1'000'000'000;
  auto& d = s.device;
  std::strcpy(d.name, "mrc0");
  std::strcpy(d.netns, "odd\"ns\\x");  // label values must be escaped
  d.path_mode = 1;
  d.local_host = 0;
  d.planes = 2;
  std::strcpy(d.plane[0].address, "fd00::1");
  std::strcpy(d.plane[1].address, "fd00:1::1");
  d.plane[1].admin_down = 1;
  d.plane[0].link_down = 1;
  d.n_peers = 1;
  std::strcpy(d.peer[0].name, "h1");
  d.peer[0].id = 0;
  d.peer[0].host = 1;
  d.drops[1] = 3;
  d.udp.datagrams_sent = 1000;
  observe::QpRecord q{};
  q.qpn = 5;
  q.state = 3;  // RTS
  q.dest_qpn = 9;
  q.ev_first = 0;
  q.ev_count = 4;
  q.has_cc = 1;
  q.cc_cwnd = 65536;
  q.tx_retransmits = 12;
  s.qps.push_back(q);
  for (uint32_t i = 0; i < 4; ++i) {
    observe::EvRecord e{};
    e.qpn = 5;
    e.plane = static_cast<uint16_t>(i / 2);
    e.spine = static_cast<uint16_t>(i % 2);
    e.ev = uint32_t{e.plane} << 16 | uint32_t{e.spine} << 8;
    e.tx_packets = 1000;
    e.lost = i == 1 ? 250 : 0;
    e.rtt_p50_ns = 100'000;
    e.rtt_p99_ns = 300'000;
    e.state = i == 1 ? 1 : 0;
    e.changes = i == 1 ? 1 : 0;
    e.reason = static_cast<uint8_t>(engine::EvReason::kLoss);
    s.evs.push_back(e);
  }
  for (uint32_t i = 0; i < 3; ++i) {
    observe::EventRecord r{};
    r.at_ns = 100 + i;
    r.qpn = 5;
    r.ev = 0x100;
    r.from = 0;
    r.to = 1;
    r.reason = 0;
    s.events.push_back(r);
  }
  s.first_event = 10;
  s.events_written = 13;
  return s;
}

TEST(View, PathsJson_ShapeAndValues) {
  const std::vector<Snapshot> snaps{make_snapshot()};
  const Json j = paths_json(snaps, Filter{});
  expect_shape(j, kPathShape, "paths");
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[1]["path"], "p0.s1");
  EXPECT_EQ(j[1]["state"], "ASSUMED_BAD");
  EXPECT_EQ(j[1]["reason"], "loss");
  EXPECT_TRUE(j[0]["reason"].is_null());
  EXPECT_DOUBLE_EQ(j[1]["loss"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j[1]["rtt_p99_us"].get<double>(), 300.0);
  EXPECT_EQ(j[3]["plane"], 1);
  EXPECT_EQ(j[3]["peer"], "h1");
  Filter f;
  f.peer = "h2";
  EXPECT_TRUE(paths_json(snaps, f).empty());
  f.peer = "h1";
  f.qpn = 6;
  EXPECT_TRUE(paths_json(snaps, f).empty());
  f.qpn = 5;
  EXPECT_EQ(paths_json(snaps, f).size(), 4u);
  f.device = "mrc1";
  EXPECT_TRUE(paths_json(snaps, f).empty());
}

TEST(View, OtherDocuments_Shape) {
  const std::vector<Snapshot> snaps{make_snapshot()};
  const Json dev = devices_json(snaps, Filter{}, 3'000'000'000);
  expect_shape(dev, kDeviceShape, "devices");
  EXPECT_DOUBLE_EQ(dev[0]["age_s"].get<double>(), 2.0);
  EXPECT_EQ(dev[0]["drops"], 3);
  EXPECT_EQ(dev[0]["path_mode"], "srv6");
  const Json ports = ports_json(snaps, Filter{});
  expect_shape(ports, kPortShape, "ports");
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[0]["evs_assumed_bad"], 1);
  EXPECT_EQ(ports[1]["admin"], "drained");
  EXPECT_EQ(ports[0]["link"], "down");
  EXPECT_EQ(ports[1]["link"], "up");
  const Json qps = qps_json(snaps, Filter{});
  expect_shape(qps, kQpShape, "qps");
  EXPECT_EQ(qps[0]["state"], "RTS");
  EXPECT_EQ(qps[0]["evs_good"], 3);
  EXPECT_EQ(qps[0]["cc"]["cwnd"], 65536);
}

TEST(View, DevicesJson_PeerAddressQueryCounters) {
  // A stranger's peer address query is refused and counted (io/udp/peer_addresses.h): the
  // devices document, its table and the metrics carry every query counter.
  Snapshot s = make_snapshot();
  s.device.addr_queries_sent = 1;
  s.device.addr_queries_answered = 2;
  s.device.addr_queries_refused = 4;
  s.device.addr_queries_rate_limited = 5;
  s.device.addr_replies_accepted = 6;
  s.device.addr_replies_dropped = 7;
  s.device.addr_peers_unanswered = 8;
  const std::vector<Snapshot> snaps{s};
  const Json dev = devices_json(snaps, Filter{}, 3'000'000'000);
  EXPECT_EQ(dev[0]["addr_queries_refused"], 4);
  EXPECT_EQ(dev[0]["addr_peers_unanswered"], 8);
  const Table t = devices_table(dev);
  const auto col = std::find(t.head.begin(), t.head.end(), "ADDRQ_REFUSED");
  ASSERT_NE(col, t.head.end());
  EXPECT_EQ(t.rows.at(0).at(static_cast<size_t>(col - t.head.begin())), "4");
  const auto samples = parse_exposition(metrics_text(snaps));
  const std::pair<const char*, double> want[] = {
      {"sent", 1}, {"answered", 2}, {"refused", 4}, {"rate_limited", 5}};
  for (const auto& [n, v] : want)
    EXPECT_EQ(
        sample(samples, std::string("mrc_udp_addr_queries_") + n + "_total", {{"device", "mrc0"}}),
        v)
        << n;
  EXPECT_EQ(sample(samples, "mrc_udp_addr_replies_accepted_total", {{"device", "mrc0"}}), 6);
  EXPECT_EQ(sample(samples, "mrc_udp_addr_replies_dropped_total", {{"device", "mrc0"}}), 7);
  EXPECT_EQ(sample(samples, "mrc_udp_addr_peers_unanswered_total", {{"device", "mrc0"}}), 8);
}

TEST(View, DevicesJson_PortCounters) {
  // An operator chasing a flapping port sees its link changes and the port status updates in
  // the devices document and the metrics.
  Snapshot s = make_snapshot();
  s.device.port_status_sent = 1;
  s.device.port_status_applied = 2;
  s.device.port_status_refused = 3;
  s.device.port_status_acks_dropped = 4;
  s.device.port_link_changes = 5;
  const std::vector<Snapshot> snaps{s};
  const Json dev = devices_json(snaps, Filter{}, 3'000'000'000);
  EXPECT_EQ(dev[0]["port_status_sent"], 1);
  EXPECT_EQ(dev[0]["port_status_acks_dropped"], 4);
  EXPECT_EQ(dev[0]["port_link_changes"], 5);
  const auto samples = parse_exposition(metrics_text(snaps));
  const std::pair<const char*, double> want[] = {{"port_status_sent", 1},
                                                 {"port_status_applied", 2},
                                                 {"port_status_refused", 3},
                                                 {"port_status_acks_dropped", 4},
                                                 {"port_link_changes", 5}};
  for (const auto& [n, v] : want)
    EXPECT_EQ(sample(samples, std::string("mrc_udp_") + n + "_total", {{"device", "mrc0"}}), v)
        << n;
}

// The driver's wake-cause counters (issue 17: what woke the progress loop, which threads did
// the receive work) and the stale port status updates reach the devices document and the
// metrics by their io::UdpCounters names.
TEST(View, DevicesJson_WakeCountersAndStalePortStatus) {
  Snapshot s = make_snapshot();
  s.device.port_status_stale = 6;
  s.device.loop_woke_socket = 11;
  s.device.loop_woke_app = 12;
  s.device.loop_woke_alarm = 13;
  s.device.loop_woke_poller_end = 14;
  s.device.loop_woke_deadline = 15;
  s.device.loop_rx_rounds = 16;
  s.device.poller_rounds = 17;
  s.device.poller_timeouts = 18;
  s.device.other_thread_rounds = 19;
  s.device.app_wakeups = 20;
  s.device.poller_polls = 21;
  s.device.poller_busy = 22;
  s.device.poller_ready_checks = 23;
  s.device.poller_recvmmsg = 24;
  s.device.poller_timer_arms = 25;
  s.device.loop_spins = 26;
  const std::vector<Snapshot> snaps{s};
  const Json dev = devices_json(snaps, Filter{}, 3'000'000'000);
  const auto samples = parse_exposition(metrics_text(snaps));
  const std::pair<const char*, double> want[] = {
      {"port_status_stale", 6},  {"loop_woke_socket", 11},     {"loop_woke_app", 12},
      {"loop_woke_alarm", 13},   {"loop_woke_poller_end", 14}, {"loop_woke_deadline", 15},
      {"loop_rx_rounds", 16},    {"poller_rounds", 17},        {"poller_timeouts", 18},
      {"other_thread_rounds", 19}, {"app_wakeups", 20},        {"poller_polls", 21},
      {"poller_busy", 22},         {"poller_ready_checks", 23}, {"poller_recvmmsg", 24},
      {"poller_timer_arms", 25},   {"loop_spins", 26}};
  for (const auto& [n, v] : want) {
    EXPECT_EQ(dev[0][n], v) << n;
    EXPECT_EQ(sample(samples, std::string("mrc_udp_") + n + "_total", {{"device", "mrc0"}}), v)
        << n;
  }
}

// A segment from an older libmrc, whose DeviceRecord ended before the counters appended
// since: the devices document and the metrics leave those out instead of reporting zeros
// that library never counted, and still show what it had.
TEST(View, DevicesJson_OlderWriterLeavesOutCountersItNeverHad) {
  Snapshot s = make_snapshot();
  s.device.rx_datagrams = 7;
  s.device.port_status_sent = 1;  // not in the older record: must not be shown
  s.device_size = static_cast<uint32_t>(observe::kDeviceRecordMinSize);
  const std::vector<Snapshot> snaps{s};
  const Json dev = devices_json(snaps, Filter{}, 3'000'000'000);
  EXPECT_EQ(dev[0]["rx_datagrams"], 7);
  for (const char* n : {"addr_queries_sent", "port_status_sent", "port_link_changes",
                        "loop_woke_socket", "app_wakeups", "loop_spins"})
    EXPECT_FALSE(dev[0].contains(n)) << n;
  const std::string text = metrics_text(snaps);
  const auto samples = parse_exposition(text);
  EXPECT_EQ(sample(samples, "mrc_engine_rx_datagrams_total", {{"device", "mrc0"}}), 7);
  for (const char* n : {"probes_answered", "addr_queries_sent", "port_status_sent",
                        "app_wakeups"})
    EXPECT_EQ(text.find(std::string("mrc_udp_") + n + "_total"), std::string::npos) << n;

  // A writer from before loop_spins: the poller counters, not it.
  s.device_size = static_cast<uint32_t>(offsetof(observe::DeviceRecord, loop_spins));
  const Json before_spins = devices_json({s}, Filter{}, 3'000'000'000);
  EXPECT_TRUE(before_spins[0].contains("poller_timer_arms"));
  EXPECT_FALSE(before_spins[0].contains("loop_spins"));

  // The newest record: all of them.
  s.device_size = sizeof(observe::DeviceRecord);
  const Json all = devices_json({s}, Filter{}, 3'000'000'000);
  EXPECT_EQ(all[0]["port_status_sent"], 1);
  EXPECT_TRUE(all[0].contains("app_wakeups"));
  EXPECT_TRUE(all[0].contains("loop_spins"));
}

TEST(View, EventsJson_FollowReturnsOnlyNew) {
  std::vector<Snapshot> snaps{make_snapshot()};
  std::vector<std::pair<std::string, uint64_t>> from;
  Json j = events_json(snaps, Filter{}, &from);
  expect_shape(j, kEventShape, "events");
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["seq"], 10);
  EXPECT_EQ(j[0]["to"], "ASSUMED_BAD");
  EXPECT_TRUE(events_json(snaps, Filter{}, &from).empty());
  observe::EventRecord r{};
  r.at_ns = 500;
  r.ev = 0x10100;
  r.to = 0;
  r.from = 1;
  r.reason = static_cast<uint8_t>(engine::EvReason::kProbeClean);
  snaps[0].events.push_back(r);
  snaps[0].events_written = 14;
  j = events_json(snaps, Filter{}, &from);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["seq"], 13);
  EXPECT_EQ(j[0]["reason"], "probe_clean");
  EXPECT_EQ(j[0]["path"], "p1.s1");
}

TEST(View, ParseEv_NamesAndNumbers) {
  uint32_t ev = 0;
  EXPECT_TRUE(parse_ev("p1.s2", &ev));
  EXPECT_EQ(ev, 0x10200u);
  EXPECT_TRUE(parse_ev("p3.s0.k7", &ev));
  EXPECT_EQ(ev, 0x30007u);
  EXPECT_TRUE(parse_ev("0x10200", &ev));
  EXPECT_EQ(ev, 0x10200u);
  EXPECT_TRUE(parse_ev("66048", &ev));
  EXPECT_EQ(ev, 66048u);
  for (const char* bad :
       {"", "p1", "p1.s2x", "p1.s2.k", "-1", "p70000.s0", "p1.s300", "abc", "0x1ffffffff", "12 "})
    EXPECT_FALSE(parse_ev(bad, &ev)) << bad;
  EXPECT_EQ(ev_text(0x10200), "p1.s2");
  EXPECT_EQ(ev_text(0x30007), "p3.s0.k7");
}

TEST(View, Render_AlignsColumns) {
  Table t;
  t.head = {"A", "LONGER"};
  t.rows = {{"xyz", "1"}, {"q", "22"}};
  EXPECT_EQ(render(t), "A    LONGER\nxyz  1\nq    22\n");
  EXPECT_EQ(render(t, {5}), "A      LONGER\nxyz    1\nq      22\n");  // follow mode's fixed widths
  const std::vector<Snapshot> snaps{make_snapshot()};
  const std::string paths = render(paths_table(paths_json(snaps, Filter{})));
  EXPECT_NE(paths.find("ASSUMED_BAD"), std::string::npos);
  EXPECT_NE(paths.find("25.00"), std::string::npos);  // loss %
}

TEST(Metrics, Exposition_ParsesAndCarriesCounters) {
  const std::vector<Snapshot> snaps{make_snapshot()};
  const auto samples = parse_exposition(metrics_text(snaps));
  ASSERT_FALSE(samples.empty());
  EXPECT_EQ(sample(samples, "mrc_path_lost_packets_total",
                   {{"pid", "42"},
                    {"device", "mrc0"},
                    {"qpn", "5"},
                    {"ev", "256"},
                    {"plane", "0"},
                    {"spine", "1"}}),
            250);
  EXPECT_EQ(sample(samples, "mrc_path_state", {{"ev", "256"}, {"state", "ASSUMED_BAD"}}), 1);
  EXPECT_EQ(sample(samples, "mrc_path_state", {{"ev", "256"}, {"state", "GOOD"}}), 0);
  EXPECT_EQ(sample(samples, "mrc_path_state", {{"ev", "256"}, {"state", "DENIED"}}), 0);
  EXPECT_EQ(sample(samples, "mrc_engine_drops_total", {{"reason", "unknown_qp"}}), 3);
  EXPECT_EQ(sample(samples, "mrc_udp_datagrams_sent_total", {{"device", "mrc0"}}), 1000);
  EXPECT_EQ(sample(samples, "mrc_plane_admin_down", {{"plane", "1"}}), 1);
  EXPECT_EQ(sample(samples, "mrc_plane_link_down", {{"plane", "0"}}), 1);
  EXPECT_EQ(sample(samples, "mrc_plane_link_down", {{"plane", "1"}}), 0);
  EXPECT_EQ(sample(samples, "mrc_qp_tx_retransmits_total", {{"qpn", "5"}}), 12);
  EXPECT_DOUBLE_EQ(sample(samples, "mrc_path_rtt_p99_seconds", {{"ev", "0"}}), 3e-4);
  EXPECT_EQ(sample(samples, "mrc_device_info", {{"netns", "odd\"ns\\x"}}), 1);
}

TEST(Metrics, Exposition_TwoDevicesStayOneFamilyBlock) {
  Snapshot a = make_snapshot(), b = make_snapshot();
  std::strcpy(b.device.name, "mrc1");
  const auto samples = parse_exposition(metrics_text({a, b}));  // fails on split families
  EXPECT_EQ(sample(samples, "mrc_udp_datagrams_sent_total", {{"device", "mrc1"}}), 1000);
}

}  // namespace
}  // namespace mrc::mrcctl

#include "run.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "mrc/engine/policy.h"
#include "mrc/io/sim/fabric.h"
#include "mrc/testing/goodput.h"
#include "mrc/testing/testbed.h"
#include "mrc/wire/wire.h"
#include "sink.h"

namespace mrc::msim {

using engine::Duration;
using engine::Time;

namespace {

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double peak_rss_mib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is KiB
}

Duration us(double x) { return Duration{std::llround(x * 1e3)}; }

}  // namespace

Capacity capacity(const Options& o) {
  return Capacity{o.planes, o.spines, o.hosts_per_t0, o.host_bps(), o.uplink_bps()};
}

Duration base_rtt(const Options& o) {
  const double pkt = (o.mtu + wire::kDataHeaderSize) * 8.0;
  const double ser_ns = pkt / o.host_gbps * 2 + pkt / (static_cast<double>(o.uplink_bps()) * 1e-9) *
                                                    2;  // 4 store-and-forward hops
  const double prop_ns = 4e3 * (o.host_latency_us + o.uplink_latency_us);  // both ways
  // Twice the bare round trip: the window (1.5 x nic_bps x base RTT) must also cover ACK
  // coalescing (ack_every 2) and the NIC's planes taking turns; with the bare figure a lone
  // pair moves 0.90 of line rate, with twice it 0.965 (4 planes x 10 Gb/s, 8 MiB).
  return Duration{std::llround(2 * (ser_ns + prop_ns))};
}

RunResult run_one(const Options& o, Transport t, const Workload& w,
                  const std::vector<Fault>& faults, double ideal_s) {
  const auto wall0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds();
  RunResult r;
  r.transport = t;
  r.ideal_s = ideal_s;

  // The shared source and where each message reads it (the same for every transport).
  const size_t n = w.messages.size();
  uint64_t max_msg = 1;
  for (const Message& m : w.messages) max_msg = std::max(max_msg, m.bytes);
  std::vector<uint8_t> source((8u << 20) + max_msg);
  std::mt19937_64 rng(o.seed);
  for (size_t i = 0; i + 8 <= source.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(&source[i], &v, 8);
  }
  std::vector<uint32_t> dst(n);
  std::vector<uint64_t> len(n), src_off(n);
  for (size_t i = 0; i < n; ++i) {
    const Message& m = w.messages[i];
    dst[i] = w.flows[m.flow].dst;
    len[i] = m.bytes;
    src_off[i] = rng() % (source.size() - m.bytes + 1);
  }
  VerifySink sink(source);
  sink.layout(w.spec.hosts, dst, len, src_off);
  sink.activate();

  engine::EngineConfig ec;
  ec.copy = &VerifySink::copy;
  ec.nic_bps = uint64_t{o.planes} * o.host_bps();
  ec.trimming = t != Transport::kMrcNoTrim;
  ec.base_rtt = o.base_rtt_us > 0   ? us(o.base_rtt_us)
                : o.base_rtt_us < 0 ? base_rtt(o)
                                    : Duration{0};
  ec.recv_window = o.mpr;
  sim::SimConfig net_cfg{o.seed};
  net_cfg.max_datagram = std::max(sim::kDatagram4K, wire::kMaxHeaderSize + size_t{o.mtu});
  sim::Testbed tb(net_cfg, ec);
  for (uint32_t h = 0; h < w.spec.hosts; ++h) tb.add_host();
  sim::FabricConfig fc;
  fc.hosts = w.spec.hosts;
  fc.planes = o.planes;
  fc.spines = o.spines;
  fc.hosts_per_t0 = o.hosts_per_t0;
  fc.host_port_bps = o.host_bps();
  fc.uplink_bps = o.uplink_bps();
  fc.host_latency = us(o.host_latency_us);
  fc.uplink_latency = us(o.uplink_latency_us);
  fc.capacity_bytes = o.buffer_bytes;
  fc.ecn_threshold_bytes = o.ecn_bytes;
  fc.trim_threshold_bytes = o.trim_bytes;
  fc.trimming = t != Transport::kMrcNoTrim;
  sim::Fabric fab(tb.net(), fc);
  // Each host's NIC sees its own ports' link (a T0 or cable down), as a PHY reports carrier,
  // and its driver tells the engine (which tells its peers in its ACKs).
  tb.report_ports(fab);

  TrafficConfig tc;
  tc.transport = t;
  tc.shape = PathShape{o.planes, o.spines, o.evs_per_plane, o.backups_per_plane};
  tc.qps_per_conn = o.qps_per_conn;
  tc.depth = o.depth;
  tc.window = o.window;
  tc.on_demand = o.on_demand;
  tc.attr.mtu = o.mtu;
  tc.attr.max_psn_range = o.mpr;
  tc.attr.timeout = o.timeout;
  tc.seed = o.seed;
  tc.trace = o.trace;
  if (!o.delay_decrease) {  // the engines' own constants, as a profile, with the rule off
    engine::EngineConfig pc = ec;  // a profile learns nothing: sized at a base RTT
    if (pc.base_rtt == Duration{0}) pc.base_rtt = base_rtt(o);
    tc.attr.cc = engine::effective_cc(pc, o.mtu);
    if (tc.attr.cc) tc.attr.cc->delay_decrease = 0;
  }
  Traffic traffic(tb, w, sink, source, src_off, tc);
  traffic.start();

  sim::SimNet& net = tb.net();
  for (const Fault& f : faults) {
    net.at(f.at, [&fab, f] { apply(f, fab); });
    r.faults.emplace_back(static_cast<double>(f.at.count()) * 1e-9, f.text);
  }
  const Duration first = kFirstRtts * (ec.base_rtt > Duration{0} ? ec.base_rtt : base_rtt(o));
  r.first_s = static_cast<double>(first.count()) * 1e-9;
  bool first_taken = false;
  const auto take_first = [&] {
    first_taken = true;
    r.first_trims = traffic.trims_seen();
    r.first_retransmits = traffic.qp_totals().tx_retransmits;
    for (sim::LinkId l = 0; l < net.link_count(); ++l) r.first_drops += net.link_stats(l).dropped();
  };
  net.at(Time{0} + first, take_first);
  r.interval_s = o.interval_s > 0 ? o.interval_s : std::max(ideal_s / 100, 1e-6);
  const Duration interval{std::max<int64_t>(1, std::llround(r.interval_s * 1e9))};
  sim::GoodputMeter meter(
      net, [&sink] { return sink.placed_bytes(); }, interval);
  meter.start(Time{0});

  const double limit_s = o.max_time_s > 0 ? o.max_time_s : 100 * ideal_s + 0.01;
  const Time limit{std::llround(limit_s * 1e9)};
  const Duration chunk{std::max<int64_t>(1000, std::llround(ideal_s * 1e9 / 200))};
  const uint64_t total = w.total_bytes();
  auto last_print = wall0;
  const bool tty = ::isatty(2);
  bool printed = false;
  while (!traffic.done() && net.now() < limit) {
    net.run_until([&traffic] { return traffic.done(); }, std::min(limit, net.now() + chunk));
    const auto now = std::chrono::steady_clock::now();
    const double wall = std::chrono::duration<double>(now - wall0).count();
    if (o.progress && wall > 2 && now - last_print >= std::chrono::seconds(1)) {
      last_print = now;
      const double frac = static_cast<double>(sink.placed_bytes()) / static_cast<double>(total);
      const double eta = frac > 0 ? wall / frac - wall : 0;
      std::fprintf(stderr,
                   "%smrc-sim %s: virtual %.3f ms (ideal %.3f ms), %.1f%% of bytes, wall %.0f s, "
                   "ETA %.0f s%s",
                   tty ? "\r" : "", to_string(t), static_cast<double>(net.now().count()) * 1e-6,
                   ideal_s * 1e3, 100 * frac, wall, eta, tty ? "   " : "\n");
      printed = true;
    }
  }
  if (printed && tty) std::fprintf(stderr, "\n");
  meter.stop();
  if (!first_taken) take_first();  // done within the span: all of it was the first RTTs

  r.traffic = traffic.stats();
  r.finished = r.traffic.verified == r.traffic.messages;
  r.completion_s = static_cast<double>(traffic.last_arrival().count()) * 1e-9;
  r.efficiency = r.finished && r.completion_s > 0 ? ideal_s / r.completion_s : 0;
  if (w.spec.pattern == Pattern::kRingAllreduce && r.finished) {
    const double nn = w.spec.hosts;
    r.busbw_gbps =
        static_cast<double>(w.spec.bytes) * 8 / r.completion_s * 2 * (nn - 1) / nn * 1e-9;
  }
  for (Time e : traffic.flow_end())
    r.fct_s.push_back(e.count() < 0 ? -1 : static_cast<double>(e.count()) * 1e-9);
  const engine::QpStats q = traffic.qp_totals();
  r.retransmits = q.tx_retransmits;
  r.rtos = q.rto_fired;
  r.data_packets = q.tx_data_packets;
  r.fast_losses = q.fast_losses;
  r.spurious_losses = q.spurious_losses;
  r.tail_probes = q.tail_probes;
  for (uint32_t h = 0; h < w.spec.hosts; ++h) {
    r.plane_holds += tb.engine(h).stats().plane_holds;
    r.ev_holds += tb.engine(h).stats().ev_holds;
  }
  r.trims = traffic.trims_seen();
  const Traffic::CcCuts cuts = traffic.cc_cuts();
  r.cc_decreases = cuts.ecn;
  r.cc_delay_decreases = cuts.delay;
  std::vector<uint8_t> egress(net.link_count(), 0);
  for (uint32_t h = 0; h < w.spec.hosts; ++h)
    for (uint16_t p = 0; p < o.planes; ++p) egress[fab.host_link(h, p, sim::Dir::kUp)] = 1;
  for (uint16_t p = 0; p < o.planes; ++p) {
    for (uint32_t h = 0; h < w.spec.hosts; ++h)
      r.trims_by_tier[2] += net.link_stats(fab.host_link(h, p, sim::Dir::kDown)).trimmed;
    for (uint32_t t0 = 0; t0 < fab.t0_count(); ++t0) {
      for (uint32_t s = 0; s < o.spines; ++s) {
        r.trims_by_tier[0] += net.link_stats(fab.link(p, t0, s, sim::Dir::kUp)).trimmed;
        r.trims_by_tier[1] += net.link_stats(fab.link(p, t0, s, sim::Dir::kDown)).trimmed;
      }
    }
  }
  for (sim::LinkId l = 0; l < net.link_count(); ++l) {
    const sim::LinkStats& s = net.link_stats(l);
    r.drops += s.dropped();
    if (!egress[l]) r.max_queue_bytes = std::max(r.max_queue_bytes, s.max_queued_bytes);
  }
  for (const auto& iv : meter.intervals())
    r.goodput.emplace_back(static_cast<double>(iv.end.count()) * 1e-9,
                           static_cast<double>(iv.bytes) * 8 / r.interval_s * 1e-9);
  r.sim_events = net.stats().events;
  r.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.sim_cpu_s = cpu_seconds() - cpu0;
  r.peak_rss_mib = peak_rss_mib();
  if (r.traffic.failed()) {
    r.failure = r.traffic.first_error;
  } else if (!r.finished) {
    r.failure = std::to_string(r.traffic.messages - r.traffic.verified) + " of " +
                std::to_string(r.traffic.messages) + " messages not delivered by " +
                std::to_string(limit_s) + " s (virtual)";
  }
  tb.set_on_input({});
  return r;
}

}  // namespace mrc::msim

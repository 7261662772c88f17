#include "traffic.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

namespace mrc::msim {

using namespace engine;

Traffic::Traffic(sim::Testbed& tb, const Workload& w, VerifySink& sink, std::span<uint8_t> source,
                 std::span<const uint64_t> src_offset, const TrafficConfig& cfg)
    : tb_(tb), w_(w), sink_(sink), source_(source), src_off_(src_offset), cfg_(cfg) {
  const size_t n = w.messages.size();
  stats_.messages = left_ = n;
  msg_dir_.resize(n);
  unlocks_.assign(n, -1);
  arrived_.assign(n, 0);
  msg_done_.assign(n, 0);
  flow_left_.assign(w.flows.size(), 0);
  flow_unsent_.assign(w.flows.size(), 0);
  flow_dirs_.resize(w.flows.size());
  flow_open_.assign(w.flows.size(), cfg.window == 0 ? 1 : 0);
  host_flows_.resize(w.spec.hosts);
  host_next_.assign(w.spec.hosts, 0);
  for (uint32_t f = 0; f < w.flows.size(); ++f) host_flows_[w.flows[f].src].push_back(f);
  flow_end_.assign(w.flows.size(), Time{-1});
  std::unordered_map<uint64_t, uint32_t> conn_of;  // (lo, hi, qp) -> conn
  std::vector<uint32_t> flow_seq(w.flows.size(), 0);
  for (size_t m = 0; m < n; ++m) {
    const Message& msg = w.messages[m];
    const Flow& f = w.flows[msg.flow];
    ++flow_left_[msg.flow];
    ++flow_unsent_[msg.flow];
    if (msg.after >= 0) unlocks_[static_cast<size_t>(msg.after)] = static_cast<int64_t>(m);
    const uint32_t q = flow_seq[msg.flow]++ % cfg.qps_per_conn;
    // On demand, a QP pair per direction (NCCL's send and receive comms); else per pair.
    const uint32_t lo = cfg.on_demand ? f.src : std::min(f.src, f.dst);
    const uint32_t hi = cfg.on_demand ? f.dst : std::max(f.src, f.dst);
    const uint64_t key = (uint64_t{lo} << 40) ^ (uint64_t{hi} << 16) ^ q;
    auto [it, fresh] = conn_of.try_emplace(key, static_cast<uint32_t>(conns_.size()));
    if (fresh) conns_.push_back(Conn{lo, hi, q, {}, {-1, -1}});
    Conn& c = conns_[it->second];
    ++c.pending;
    const int side = f.src == c.a ? 0 : 1;
    if (c.dir[side] < 0) {
      c.dir[side] = static_cast<int64_t>(dirs_.size());
      dirs_.push_back(Dir{f.src, f.dst});
      dirs_.back().conn = it->second;
    }
    Dir& d = dirs_[static_cast<size_t>(c.dir[side])];
    msg_dir_[m] = static_cast<uint32_t>(c.dir[side]);
    auto& fd = flow_dirs_[msg.flow];
    if (std::find(fd.begin(), fd.end(), msg_dir_[m]) == fd.end()) fd.push_back(msg_dir_[m]);
    d.msgs.push_back(m);
  }
}

void Traffic::start() {
  const uint32_t H = w_.spec.hosts;
  src_key_.resize(H);
  sink_key_.assign(H, 0);
  conn_of_qpn_.resize(H);
  for (uint32_t h = 0; h < H; ++h) {
    src_key_[h] = tb_.register_mr(h, source_);
    if (sink_.window_bytes(h) > 0)
      sink_key_[h] = tb_.register_mr(h, {sink_.window(h), sink_.window_bytes(h)});
  }
  attr_ = cfg_.attr;
  attr_.backup_paths = backup_paths(cfg_.transport, cfg_.shape);
  if (cfg_.transport == Transport::kPlane || cfg_.transport == Transport::kEcmp)
    attr_.path_policy.min_active_per_plane = 1;  // one EV per plane is all there is
  if (!cfg_.on_demand || cfg_.window == 0)
    for (uint32_t ci = 0; ci < conns_.size(); ++ci) connect(ci);
  tb_.set_on_input([this](PeerId h) { on_input(h); });
  if (cfg_.window > 0)
    for (uint32_t h = 0; h < w_.spec.hosts; ++h)
      for (uint32_t i = 0; i < cfg_.window; ++i) open_next_flow(h);
  for (Dir& d : dirs_) post_messages(d);
}

void Traffic::connect(uint32_t ci) {
  Conn& c = conns_[ci];
  const auto pa = send_paths(cfg_.transport, cfg_.shape, c.a, c.b, c.q, cfg_.seed);
  const auto pb = send_paths(cfg_.transport, cfg_.shape, c.b, c.a, c.q, cfg_.seed);
  c.qp = tb_.connect(c.a, c.b, pa, pb, attr_, cfg_.depth);
  c.live = true;
  stats_.qps += 2;
  for (auto [h, qpn] : {std::pair{c.a, c.qp.a}, std::pair{c.b, c.qp.b}}) {
    auto& v = conn_of_qpn_[h];
    if (v.size() <= qpn) v.resize(size_t{qpn} + 1, UINT32_MAX);
    v[qpn] = ci;
  }
  live_qps_ += 2;
  stats_.max_live_qps = std::max(stats_.max_live_qps, live_qps_);
  for (int side = 0; side < 2; ++side) {
    if (c.dir[side] < 0) continue;
    Dir& d = dirs_[static_cast<size_t>(c.dir[side])];
    d.sqp = side == 0 ? c.qp.a : c.qp.b;
    d.rqp = side == 0 ? c.qp.b : c.qp.a;
    post_receives(d);
  }
}

uint32_t Traffic::peer_of(uint32_t h, Qpn q) const {
  if (q >= conn_of_qpn_[h].size() || conn_of_qpn_[h][q] == UINT32_MAX) return UINT32_MAX;
  const Conn& c = conns_[conn_of_qpn_[h][q]];
  return c.a == h ? c.b : c.a;
}

void Traffic::add_stats(uint32_t h, Qpn q) {
  const Engine& e = tb_.engine(h);
  const QpStats* s = e.qp_stats(q);
  if (s) accumulate(closed_, *s);
  if (s && cfg_.trace && s->rto_fired > 0)
    std::fprintf(stderr,
                 "trace %.3f us: host %u QP %u (peer %u) closed after %llu RTO(s): %llu data "
                 "packets, %llu resent, %llu ACKs, %llu NACKs, %llu tail probes, %llu RTT "
                 "samples\n",
                 static_cast<double>(tb_.net().now().count()) * 1e-3, h, q, peer_of(h, q),
                 static_cast<unsigned long long>(s->rto_fired),
                 static_cast<unsigned long long>(s->tx_data_packets),
                 static_cast<unsigned long long>(s->tx_retransmits),
                 static_cast<unsigned long long>(s->rx_acks),
                 static_cast<unsigned long long>(s->rx_nacks),
                 static_cast<unsigned long long>(s->tail_probes),
                 static_cast<unsigned long long>(s->rtt_samples));
  e.path_stats(q, path_stats_);
  for (const PathStats& p : path_stats_) closed_trims_ += p.trims;
  if (const auto cc = e.cc_stats(q)) {
    closed_cuts_.ecn += cc->decreases;
    closed_cuts_.delay += cc->delay_decreases;
  }
}

void Traffic::finish_message(uint64_t m) {
  if (msg_done_[m] != 3) return;
  Conn& c = conns_[dirs_[msg_dir_[m]].conn];
  if (--c.pending > 0 || !cfg_.on_demand) return;
  // Nothing left on this QP pair: close it (its stats kept), as a connection torn down.
  for (auto [h, qpn] : {std::pair{c.a, c.qp.a}, std::pair{c.b, c.qp.b}}) {
    add_stats(h, qpn);
    (void)tb_.engine(h).destroy_qp(qpn);
    conn_of_qpn_[h][qpn] = UINT32_MAX;
  }
  c.live = false;
  live_qps_ -= 2;
}

void Traffic::open_next_flow(uint32_t h) {
  auto& flows = host_flows_[h];
  if (host_next_[h] >= flows.size()) return;
  const uint32_t f = flows[host_next_[h]++];
  flow_open_[f] = 1;
  for (uint32_t di : flow_dirs_[f])
    if (!conns_[dirs_[di].conn].live) connect(dirs_[di].conn);
}

void Traffic::fail(const std::string& why) {
  if (stats_.first_error.empty()) stats_.first_error = why;
}

void Traffic::post_receives(Dir& d) {
  Engine& e = tb_.engine(d.dst);
  while (d.recvs_posted < d.msgs.size() && d.recvs_posted - d.next_recv < cfg_.depth) {
    RecvWr r;
    r.wr_id = d.msgs[d.recvs_posted];
    if (!e.post_recv(d.rqp, r).ok()) {
      ++stats_.error_completions;
      return fail("post_recv refused");
    }
    ++d.recvs_posted;
  }
}

void Traffic::post_messages(Dir& d) {
  if (!conns_[d.conn].live) return;
  Engine& e = tb_.engine(d.src);
  while (d.next_post < d.msgs.size() && d.in_flight < cfg_.depth) {
    const uint64_t m = d.msgs[d.next_post];
    const int64_t after = w_.messages[m].after;
    if (after >= 0 && !arrived_[static_cast<size_t>(after)]) return;
    if (!flow_open_[w_.messages[m].flow]) return;
    const uint64_t len = w_.messages[m].bytes;
    Sge s{reinterpret_cast<uint64_t>(source_.data() + src_off_[m]), static_cast<uint32_t>(len),
          src_key_[d.src]};
    SendWr wr;
    wr.wr_id = m;
    wr.opcode = Opcode::kWriteImm;
    wr.sg = {&s, 1};
    wr.remote_addr = sink_.dst_addr(m);
    wr.rkey = sink_key_[d.dst];
    wr.imm = static_cast<uint32_t>(m);
    if (!e.post_send(d.sqp, wr).ok()) {
      ++stats_.error_completions;
      return fail("post_send refused");
    }
    ++d.next_post;
    ++d.in_flight;
    ++sends_;
  }
}

void Traffic::on_input(PeerId h) {
  Engine& e = tb_.engine(h);
  const Time now = tb_.net().now();
  Completion cs[64];
  while (size_t n = e.poll_cq(tb_.cq(h), cs)) {
    for (size_t i = 0; i < n; ++i) {
      const Completion& c = cs[i];
      const auto& map = conn_of_qpn_[h];
      if (c.qpn >= map.size() || map[c.qpn] == UINT32_MAX) continue;
      const Conn& conn = conns_[map[c.qpn]];
      const bool is_a = h == conn.a && c.qpn == conn.qp.a;
      if (c.opcode == WcOpcode::kRecvWriteImm || c.opcode == WcOpcode::kRecv) {
        const int64_t di = conn.dir[is_a ? 1 : 0];  // the direction that arrives at h
        if (c.status != WcStatus::kSuccess) {
          ++stats_.error_completions;
          fail(std::string("receive completion: ") + to_string(c.status));
          continue;
        }
        if (di < 0) {
          ++stats_.out_of_order;
          fail("a receive completion on a QP with nothing to receive");
          continue;
        }
        Dir& d = dirs_[static_cast<size_t>(di)];
        const uint64_t m = d.msgs[d.next_recv++];
        if (c.imm != static_cast<uint32_t>(m)) {
          ++stats_.out_of_order;
          fail("message " + std::to_string(c.imm) + " completed where " + std::to_string(m) +
               " was next");
          continue;
        }
        switch (sink_.check(m)) {
          case VerifySink::Verdict::kOk:
            ++stats_.verified;
            break;
          case VerifySink::Verdict::kLost:
            ++stats_.lost;
            fail("message " + std::to_string(m) + " completed with bytes missing");
            break;
          case VerifySink::Verdict::kDuplicated:
            ++stats_.duplicated;
            fail("message " + std::to_string(m) + " completed with bytes placed twice");
            break;
          case VerifySink::Verdict::kCorrupted:
            ++stats_.corrupted;
            fail("message " + std::to_string(m) + " completed with wrong bytes");
            break;
        }
        arrived_[m] = 1;
        --left_;
        msg_done_[m] |= 1;
        last_ = now;
        const uint32_t f = w_.messages[m].flow;
        if (--flow_left_[f] == 0) flow_end_[f] = now;
        post_receives(d);
        if (const int64_t u = unlocks_[m]; u >= 0) post_messages(dirs_[msg_dir_[u]]);
        finish_message(m);
      } else {
        const uint64_t m = c.wr_id;
        if (m >= msg_dir_.size()) continue;
        Dir& d = dirs_[msg_dir_[m]];
        --d.in_flight;
        --sends_;
        if (c.status != WcStatus::kSuccess) {
          ++stats_.error_completions;
          fail(std::string("send completion: ") + to_string(c.status));
          continue;
        }
        msg_done_[m] |= 2;
        finish_message(m);
        if (--flow_unsent_[w_.messages[m].flow] == 0 && cfg_.window > 0) {
          // The flow is done at the sender: the host opens its next one.
          const uint64_t before = host_next_[h];
          open_next_flow(h);
          if (host_next_[h] != before) {
            const uint32_t f = host_flows_[h][before];
            for (uint32_t di : flow_dirs_[f]) post_messages(dirs_[di]);
          }
        }
        post_messages(d);
      }
    }
  }
  while (auto ev = e.poll_event()) {
    if (ev->type == EventType::kEvState) ++stats_.ev_changes;
    if (ev->type == EventType::kEvState && cfg_.trace)
      std::fprintf(stderr, "trace %.3f us: host %u QP %u (peer %u) EV %u plane %u: %s -> %s (%s)\n",
                   static_cast<double>(ev->at.count()) * 1e-3, h, ev->qpn, peer_of(h, ev->qpn),
                   ev->ev, ev->plane, to_string(static_cast<EvState>(ev->from)),
                   to_string(static_cast<EvState>(ev->to)),
                   to_string(static_cast<EvReason>(ev->reason)));
    if (ev->type == EventType::kQpFatal) {
      ++stats_.qp_errors;
      fail("host " + std::to_string(h) + ": QP error (" + to_string(ev->cause) + ")");
    }
  }
}

void accumulate(QpStats& t, const QpStats& s) {
  t.tx_data_packets += s.tx_data_packets;
  t.tx_retransmits += s.tx_retransmits;
  t.tx_payload_bytes += s.tx_payload_bytes;
  t.rx_payload_bytes += s.rx_payload_bytes;
  t.rto_fired += s.rto_fired;
  t.fast_losses += s.fast_losses;
  t.tail_probes += s.tail_probes;
  t.spurious_losses += s.spurious_losses;
  t.rnr_naks += s.rnr_naks;
  t.error_completions += s.error_completions;
}

QpStats Traffic::qp_totals() const {
  QpStats t = closed_;
  for (uint32_t h = 0; h < w_.spec.hosts; ++h) {
    const Engine& e = tb_.engine(h);
    for (Qpn q = 1; q <= e.max_qpn(); ++q) {
      if (const QpStats* s = e.qp_stats(q)) accumulate(t, *s);
    }
  }
  return t;
}

uint64_t Traffic::trims_seen() const {
  uint64_t n = closed_trims_;
  for (uint32_t h = 0; h < w_.spec.hosts; ++h) {
    const Engine& e = tb_.engine(h);
    for (Qpn q = 1; q <= e.max_qpn(); ++q) {
      e.path_stats(q, path_stats_);
      for (const PathStats& p : path_stats_) n += p.trims;
    }
  }
  return n;
}

Traffic::CcCuts Traffic::cc_cuts() const {
  CcCuts n = closed_cuts_;
  for (uint32_t h = 0; h < w_.spec.hosts; ++h) {
    const Engine& e = tb_.engine(h);
    for (Qpn q = 1; q <= e.max_qpn(); ++q) {
      if (const auto cc = e.cc_stats(q)) {
        n.ecn += cc->decreases;
        n.delay += cc->delay_decreases;
      }
    }
  }
  return n;
}

}  // namespace mrc::msim

// The traffic layer of mrc-sim: a Workload (pattern.h) as real engine work on a Testbed.
// Threading: single-threaded, like the Testbed; it runs inside the net's loop through the
// Testbed's on_input hook.
//
// Connections: each pair of hosts that talks gets `qps_per_conn` RC QP pairs (one QP on
// each host), made before the run; an RC QP carries both directions, so a pair talking both
// ways (alltoall) shares its QPs. A flow's messages go round robin over its QPs. Each end
// sends on the EVs its transport gives it (transport.h).
//
// Messages are RDMA WRITE_WITH_IMM: the payload from the sender's shared random source
// buffer into the receiver's window of the VerifySink (sink.h), the message index as the
// immediate. Per QP and direction: up to `depth` WRITEs posted (the send queue) and as many
// receives kept posted at the receiver (a WRITE_WITH_IMM consumes one). A message whose
// Message::after has not arrived yet waits, and so do the ones behind it on that QP (they
// are posted in order). With a window, a host opens its flows W at a time, in order.
//
// On the receiver's completion of a message (imm and order checked against what that QP
// must deliver next), the sink's verdict on its bytes is taken, the receive is reposted, the
// flow's completion time recorded when it was its last message, and any message it gates
// (ring-allreduce: the next step's slice at this host) is posted at once, in the same
// instant. Send completions free send-queue slots. Error completions, QP errors and bad
// verdicts are counted; any of them ends the run as failed (done() turns true).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mrc/engine/engine.h"
#include "mrc/testing/testbed.h"
#include "pattern.h"
#include "sink.h"
#include "transport.h"

namespace mrc::msim {

struct TrafficConfig {
  Transport transport = Transport::kMrc;
  PathShape shape;
  uint32_t qps_per_conn = 1;
  uint32_t depth = 16;  // send-queue slots (and receives kept posted) per QP
  // Flows a host has in flight at once (0: all): the next one, in workload order, starts
  // when one has all its WRITEs completed at the sender (NCCL's p2p scheduling of peers).
  uint32_t window = 0;
  engine::QpAttr attr;  // mtu, max_psn_range, timeout, retries (paths are filled in here)
  uint64_t seed = 1;
  // QP pairs made when a flow opens and destroyed when they have nothing left, one pair per
  // direction: live QPs stay near hosts x window instead of hosts^2 (memory at 1,024 hosts).
  bool on_demand = false;
  // Diagnosis (--trace): on stderr, every EV state change as it happens (host, QP, its peer,
  // EV, plane, from -> to, reason; an RTO blames the EVs of what it expired: reason
  // `timeout`), and every QP that took an RTO with its counters when it is closed.
  bool trace = false;
};

/// Adds every counter of s into t.
void accumulate(engine::QpStats& t, const engine::QpStats& s);

/// Counters of one run's traffic. They only grow.
struct TrafficStats {
  uint64_t messages = 0;                             // in the workload
  uint64_t verified = 0;                             // arrived, every byte exactly once and intact
  uint64_t lost = 0, duplicated = 0, corrupted = 0;  // sink verdicts at completion
  uint64_t out_of_order = 0;  // a completion that was not the QP's next message
  uint64_t error_completions = 0;
  uint64_t qp_errors = 0;     // kQpFatal events
  uint64_t ev_changes = 0;    // kEvState events
  uint64_t qps = 0;           // QPs made (both ends counted)
  uint64_t max_live_qps = 0;  // most QPs existing at once
  std::string first_error;
  bool failed() const {
    return lost + duplicated + corrupted + out_of_order + error_completions + qp_errors > 0;
  }
};

class Traffic {
 public:
  /// `source` is registered on every host as its send buffer; message i reads at
  /// src_offset[i]. The sink must be laid out for the workload.
  Traffic(sim::Testbed& tb, const Workload& w, VerifySink& sink, std::span<uint8_t> source,
          std::span<const uint64_t> src_offset, const TrafficConfig& cfg);

  /// Makes the QPs, posts receives and every message not gated, installs the hook.
  void start();
  /// Every message verified and every send completed, or a failure.
  bool done() const { return (left_ == 0 && sends_ == 0) || stats_.failed(); }

  const TrafficStats& stats() const { return stats_; }
  /// Completion time of each flow (time its last message was verified; -1 ns: never).
  std::span<const engine::Time> flow_end() const { return flow_end_; }
  /// Time the last message was verified.
  engine::Time last_arrival() const { return last_; }
  /// Sum over every QP of every host (read at the end).
  engine::QpStats qp_totals() const;
  uint64_t trims_seen() const;  // trim NACKs the senders got, over every EV
  /// NSCC's window decreases over every QP: ECN (multiplicative) and delay-based.
  struct CcCuts {
    uint64_t ecn = 0, delay = 0;
  };
  CcCuts cc_cuts() const;

 private:
  struct Dir {  // one direction of one QP pair
    uint32_t src = 0, dst = 0;
    engine::Qpn sqp = 0, rqp = 0;  // the QP at src, at dst
    std::vector<uint64_t> msgs;    // in posting order
    size_t next_post = 0, next_recv = 0, recvs_posted = 0;
    uint32_t in_flight = 0;
    uint32_t conn = 0;
  };
  struct Conn {
    uint32_t a = 0, b = 0;  // a < b
    uint32_t q = 0;         // which QP of the pair's qps_per_conn (the flow hash varies it)
    sim::Testbed::QpPair qp;
    int64_t dir[2] = {-1, -1};  // a->b, b->a
    bool live = false;          // its QPs exist
    uint64_t pending = 0;       // messages not yet both verified and send-completed
  };
  void connect(uint32_t conn);
  void finish_message(uint64_t m);
  void add_stats(uint32_t host, engine::Qpn qpn);
  uint32_t peer_of(uint32_t host, engine::Qpn qpn) const;  // UINT32_MAX: not one of ours
  engine::QpAttr attr_;
  std::vector<uint8_t> msg_done_;  // bit 0: verified at the receiver, bit 1: send completed
  engine::QpStats closed_;         // of QPs destroyed on demand
  uint64_t closed_trims_ = 0;
  mutable std::vector<engine::PathStats> path_stats_;  // one QP's, reused (Engine::path_stats)
  CcCuts closed_cuts_;  // of QPs destroyed on demand
  uint64_t live_qps_ = 0;
  void on_input(engine::PeerId h);
  void post_messages(Dir& d);
  void post_receives(Dir& d);
  void fail(const std::string& why);

  sim::Testbed& tb_;
  const Workload& w_;
  VerifySink& sink_;
  std::span<uint8_t> source_;
  std::span<const uint64_t> src_off_;
  TrafficConfig cfg_;
  std::vector<Conn> conns_;
  std::vector<Dir> dirs_;
  std::vector<uint32_t> msg_dir_;
  std::vector<int64_t> unlocks_;  // message -> the message it gates, or -1
  std::vector<uint8_t> arrived_;
  std::vector<uint64_t> flow_left_;                // messages not yet verified
  std::vector<uint64_t> flow_unsent_;              // messages whose send has not completed
  std::vector<uint8_t> flow_open_;                 // may post (window)
  std::vector<std::vector<uint32_t>> flow_dirs_;   // the QP directions a flow uses
  std::vector<std::vector<uint32_t>> host_flows_;  // per source host, in start order
  std::vector<size_t> host_next_;                  // next flow of the host to open
  void open_next_flow(uint32_t host);
  std::vector<engine::Time> flow_end_;
  std::vector<std::vector<uint32_t>> conn_of_qpn_;  // [host][qpn] -> conn
  std::vector<uint32_t> src_key_, sink_key_;
  uint64_t left_ = 0, sends_ = 0;
  engine::Time last_{0};
  TrafficStats stats_;
};

}  // namespace mrc::msim

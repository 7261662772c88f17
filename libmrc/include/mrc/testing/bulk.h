// A verified bulk RDMA WRITE stream between two hosts of a Testbed: keeps a
// number of WRITEs outstanding, checks every byte of each completed one at its
// destination, reposts. The workload of fault runs (tests, demo, perf).
// Threading: single-threaded, like the Testbed; call pump() between SimNet runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mrc/testing/testbed.h"

namespace mrc::sim {

class BulkWrite {
 public:
  struct Config {
    uint32_t msg_bytes = 1 << 20;  // bytes per WRITE
    uint32_t outstanding = 8;      // WRITEs in flight
    uint64_t seed = 1;             // source pattern
  };
  /// Owns the completions of `src`'s CQ from now on (one stream per sending host).
  BulkWrite(Testbed& tb, PeerId src, PeerId dst, const Testbed::QpPair& qp, const Config& cfg);
  BulkWrite(Testbed& tb, PeerId src, PeerId dst, const Testbed::QpPair& qp)
      : BulkWrite(tb, src, dst, qp, Config{}) {}

  /// Drains completions (verifying each WRITE's bytes) and posts up to `outstanding`.
  void pump();
  /// Runs the network to `t`, pumping every `step`.
  void run_until(Time t, Duration step = Duration{100'000});

  /// Stops posting; what is in flight still completes (and is verified) on pump().
  void stop_posting() { posting_ = false; }
  /// A completion waits in the source's CQ (a run_until predicate: repost at once).
  bool cqe_ready() const;

  uint64_t in_flight() const { return posted_ - done_; }
  uint64_t completed() const { return verified_ + mismatches_; }  // successful completions
  uint64_t completed_bytes() const { return completed() * cfg_.msg_bytes; }
  uint64_t verified() const { return verified_; }      // WRITEs whose every byte matched
  uint64_t mismatches() const { return mismatches_; }  // WRITEs whose bytes differ
  uint64_t errors() const { return errors_; }          // error completions, failed posts
  const std::string& first_error() const { return first_error_; }
  bool ok() const { return mismatches_ == 0 && errors_ == 0; }

 private:
  Testbed& tb_;
  PeerId src_, dst_;
  Testbed::QpPair qp_;
  Config cfg_;
  std::vector<uint8_t> src_mem_, dst_mem_;
  uint32_t skey_ = 0, dkey_ = 0;
  uint64_t posted_ = 0, done_ = 0, verified_ = 0, mismatches_ = 0, errors_ = 0;
  bool posting_ = true;
  std::string first_error_;
  uint64_t src_offset(uint64_t k) const;
  uint64_t slot(uint64_t k) const { return (k % (2 * cfg_.outstanding)) * cfg_.msg_bytes; }
};

/// The QP attributes of the scenario tests' long-running streams: 4 KiB MTU, a 1,024-PSN
/// window, ack timeout 14 (16.8 ms), 7 linear and 7 exponential retries. Paths and backups
/// are the caller's.
inline engine::QpAttr bulk_stream_attr() {
  engine::QpAttr at;
  at.mtu = 4096;
  at.max_psn_range = 1024;
  at.timeout = 14;
  at.retry_cnt_linear = 7;
  at.retry_cnt_exp = 7;
  return at;
}

/// Runs every stream's pump() every `step` until `t` (streams sharing one network).
void run_streams(SimNet& net, std::span<BulkWrite* const> streams, Time t,
                 Duration step = Duration{100'000});

}  // namespace mrc::sim

// The plugin's environment knobs, read once at init. Threading: plain values.
//
// Names shared with the MRC plugin for NCCL mean the same there and here:
//   NCCL_MRC_TIMEOUT            QP ack timeout exponent t: 1.024 us x 2^t (1..24)       [16]
//   NCCL_MRC_RETRY_CNT_LINEAR   retries at that timeout (0..7)                          [7]
//   NCCL_MRC_RETRY_CNT_EXP      then retries with doubling timeout (0..25, 25 = forever) [5]
//                               defaults (timeout, retries, MPR): the connection policy
//                               every face shares (engine/retry.h, engine.h), so a QP whose
//                               paths all stay dead fails in ~8.9 s, as an OCP or verbs one
//   NCCL_MRC_QP_HINT_ENABLE     pass the CC rate hints below to the QP (0/1)             [1]
//   NCCL_MRC_CC_INIT_RATE       starting rate, Mbit/s, 0 = none (the window starts full) [0]
//   NCCL_MRC_CC_MIN_RATE        lowest rate the window may fall to, Mbit/s, 0 = none     [0]
//   NCCL_MRC_CC_MAX_RATE        highest rate, Mbit/s, 0 = none (the NIC's)               [0]
//                               rates become windows: rate x the base RTT
// Ours:
//   NCCL_MRC_CONFIG             host config files, comma separated, one NCCL device each
//                               (mrc0, mrc1, ...); unset: libmrc's lookup ($MRC_CONFIG,
//                               /etc/mrc/mrc.json, MRC_* variables; see io/config.h)
//   NCCL_MRC_DEVICES            which of those devices to offer, e.g. "0" or "1,0"        [all]
//   NCCL_MRC_CTRL_ADDR          IPv6 address for the TCP control connections [plane 0's]
//   NCCL_MRC_MAX_PSN_RANGE      packets in flight per QP (MPR)                           [1024]
//   NCCL_MRC_QPS_PER_CONN       QPs per connection (1..8): a send comm's messages go to them
//                               in turn; the acceptor follows the connector's count      [1]
//   NCCL_MRC_EAGER              largest message, bytes, a sender writes to the receive
//                               comm's eager ring before the receive's CTS has come
//                               (0..65536; 0: off; one QP per connection only; net.h)  [8192]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mrc/common/result.h"
#include "mrc/engine/engine.h"
#include "mrc/engine/retry.h"
#include "mrc/io/config.h"

namespace mrc::nccl {

struct Knobs {
  uint8_t timeout = engine::kDefaultAckTimeout;
  uint8_t retry_cnt_linear = engine::kDefaultRetryLinear;
  uint8_t retry_cnt_exp = engine::kDefaultRetryExp;
  bool qp_hint = true;
  uint64_t cc_init_mbps = 0, cc_min_mbps = 0, cc_max_mbps = 0;
  std::vector<std::string> config_files;  // empty: libmrc's own lookup
  std::vector<uint32_t> devices;          // empty: all
  std::string ctrl_addr;                  // empty: plane 0's address
  uint32_t max_psn_range = engine::kDefaultMaxPsnRange;
  uint32_t qps_per_conn = 1;
  uint32_t eager_bytes = 8192;
};

/// Reads the knobs; the error names the variable and what it takes.
Result<Knobs, std::string> read_knobs(const io::Getenv& env = io::process_env);

}  // namespace mrc::nccl

// Retransmission timeout and retry budget with OCP MRC / verbs semantics.
// Threading: plain value type.
//
// The QP's `timeout` attribute t gives the base ack timeout 1.024 us x 2^t
// (verbs: t = 0 means wait forever). Consecutive timeouts without progress
// are counted: the first `linear` retries wait the base timeout, the next
// `exp` retries double it each time (capped at 2^31 x 1.024 us). After
// linear + exp retries the QP fails with RETRY_EXC_ERR, except exp == 25,
// which means retry forever (OCP MRC). Any progress (a newly acknowledged
// packet) resets the count.
//
// The base is never below the path's measured round trip (RFC 6298: SRTT + 4 RTTVAR, plus
// the receiver's ACK delay), the `floor` argument: a NIC's RTT is microseconds, a software
// transport's can be tens of milliseconds on a busy host or behind a standing queue, and a
// timeout shorter than the round trip resends the whole window every round trip (a
// retransmission storm that feeds the queue it fires on) and spends the retry budget on a
// healthy peer. The retry count, and so the verbs meaning of retry_cnt, is unchanged.
#pragma once

#include <algorithm>
#include <cstdint>

#include "mrc/engine/types.h"

namespace mrc::engine {

inline constexpr uint8_t kRetryForever = 25;  // retry_cnt_exp value meaning "never give up"

/// The ack timeout exponent every front end gives a QP whose application set none: 67.1 ms
/// (1.024 us x 2^16), what a verbs program's usual timeout 14 (4.096 us units) asks for. The
/// OCP API, the NCCL plugin (NCCL_MRC_TIMEOUT unset) and the verbs layer (no IBV_QP_TIMEOUT at
/// RTR) take it from here. It is the base that the measured round trip may only raise: 16.8 ms
/// (t = 14) fired timeouts that resent the whole window whenever a loaded host stalled a little
/// longer than that (perf/RESULTS.md, issue 23).
inline constexpr uint8_t kDefaultAckTimeout = 16;

/// The retry budget every front end gives a QP whose application set none (the OCP API's
/// QP defaults, the NCCL plugin with NCCL_MRC_RETRY_CNT_* unset, engine::QpAttr): 7 retries
/// at the base timeout, then 5 with a doubling one. A silent peer fails the QP after waits of
/// 7 + (2 + 4 + ... + 64) = 133 bases, 8.9 s at 67.1 ms: long enough to ride out a spine or
/// plane that reboots (probes bring its paths back), short enough that a dead peer is
/// reported while the job can still react. One value for every face, so that a face's
/// throughput or failure time never depends on which face it is (issue 23); a face that
/// differs does so because its application asked (a verbs program's retry_cnt).
inline constexpr uint8_t kDefaultRetryLinear = 7;
inline constexpr uint8_t kDefaultRetryExp = 5;

struct RetryPolicy {
  uint8_t timeout = kDefaultAckTimeout;  // exponent t
  uint8_t linear = kDefaultRetryLinear;  // retries at the base timeout (0..7)
  uint8_t exp = kDefaultRetryExp;        // retries with doubling timeout (0..25)

  /// 1.024 us x 2^timeout; kNever for timeout 0.
  Duration base() const {
    if (timeout == 0) return kNever;
    return Duration{int64_t{1024} << (timeout < 31 ? timeout : 31)};
  }
  /// Timeout to wait before retry number `retries + 1`, after `retries`
  /// consecutive timeouts so far, from a base of max(base(), floor) (floor: the measured
  /// round trip, 0 before any). Inline: the engine asks for it with every packet sent.
  Duration rto(uint32_t retries, Duration floor = Duration{0}) const {
    Duration b = base();
    if (b == kNever) return b;
    b = std::max(b, floor);
    if (retries < linear) return b;
    return backed_off(b, retries - linear + 1);
  }
  /// True when `retries` consecutive timeouts exceed the budget.
  bool exhausted(uint32_t retries) const;

 private:
  /// rto() past the linear retries: b doubled `doublings` times, capped at 2^31 x 1.024 us.
  static Duration backed_off(Duration b, uint32_t doublings);
};

}  // namespace mrc::engine

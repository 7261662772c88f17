// RetryPolicy: OCP MRC timeout exponent, linear then exponential retries, 25 = forever.
#include "mrc/engine/retry.h"

#include <gtest/gtest.h>

#include "mrc/engine/engine.h"

namespace mrc::engine {
namespace {

TEST(RetryPolicy, Base_IsMicrosecondsTimesPowerOfTwo) {
  EXPECT_EQ((RetryPolicy{8, 7, 0}.base()), Duration{262144});       // ~262 us, the OCP example
  EXPECT_EQ((RetryPolicy{20, 7, 0}.base()), Duration{1073741824});  // ~1.07 s, NCCL default
  EXPECT_EQ((RetryPolicy{0, 7, 0}.base()), kNever);                 // verbs: wait forever
}

TEST(RetryPolicy, Rto_LinearThenDoubling) {
  RetryPolicy p{10, 3, 4};
  const Duration b = p.base();
  EXPECT_EQ(p.rto(0), b);
  EXPECT_EQ(p.rto(2), b);
  EXPECT_EQ(p.rto(3), 2 * b);
  EXPECT_EQ(p.rto(4), 4 * b);
  EXPECT_EQ(p.rto(6), 16 * b);
}

// The base is never below the measured round trip given as the floor; backoff applies to it.
TEST(RetryPolicy, Rto_NeverBelowTheFloor) {
  RetryPolicy p{10, 2, 3};
  const Duration b = p.base();
  EXPECT_EQ(p.rto(0, b / 2), b);  // a short round trip leaves the verbs timeout
  EXPECT_EQ(p.rto(0, 3 * b), 3 * b);
  EXPECT_EQ(p.rto(1, 3 * b), 3 * b);
  EXPECT_EQ(p.rto(2, 3 * b), 6 * b);
  EXPECT_EQ(p.rto(3, 3 * b), 12 * b);
  EXPECT_EQ((RetryPolicy{0, 7, 0}.rto(0, b)), kNever);  // timeout 0 still waits forever
}

TEST(RetryPolicy, Rto_CappedNoOverflow) {
  RetryPolicy p{24, 0, 25};
  for (uint32_t r = 0; r < 200; ++r) {
    EXPECT_GT(p.rto(r), Duration{0});
    EXPECT_LE(p.rto(r), Duration{int64_t{1024} << 31});
  }
}

TEST(RetryPolicy, Exhausted_AfterLinearPlusExp) {
  RetryPolicy p{10, 7, 2};
  EXPECT_FALSE(p.exhausted(9));
  EXPECT_TRUE(p.exhausted(10));
  RetryPolicy none{10, 0, 0};
  EXPECT_FALSE(none.exhausted(0));
  EXPECT_TRUE(none.exhausted(1));
}

TEST(RetryPolicy, Exhausted_NeverWhenExpIs25) {
  RetryPolicy p{10, 7, kRetryForever};
  EXPECT_FALSE(p.exhausted(1000000));
}

// The connection policy's budget (what every face gives a QP whose app set none): QpAttr's
// defaults are RetryPolicy's, and a silent peer fails the QP after 7 + 2 + 4 + ... + 64 = 133
// bases of 67.1 ms, 8.9 s. The faces' tests compare their defaults with QpAttr's.
TEST(RetryPolicy, Default_IsTheConnectionPolicy) {
  const QpAttr a;
  const RetryPolicy p;
  EXPECT_EQ(a.timeout, p.timeout);
  EXPECT_EQ(a.retry_cnt_linear, p.linear);
  EXPECT_EQ(a.retry_cnt_exp, p.exp);
  EXPECT_EQ(p.base(), Duration{67108864});
  Duration waited{0};  // until the timeout that finds the budget spent
  uint32_t timeouts = 0;
  while (!p.exhausted(timeouts)) waited += p.rto(timeouts++);
  EXPECT_EQ(timeouts, 13u);  // 12 retries, then failure
  EXPECT_EQ(waited, 133 * p.base());
  EXPECT_EQ(a.max_psn_range, 1024u);
}

}  // namespace
}  // namespace mrc::engine

// Two UDP drivers on a namespace fabric (2 hosts, 2 planes x 2 spines, 1 Gbit/s ports), each
// with one progress thread per plane (UdpConfig::progress_threads = 2), carrying mrc-perf's
// verified WRITEs: every byte checked, thread 1 fed each engine, and the run's end stops
// both drivers' threads. Skips (saying why) where namespaces cannot be made.
#include <gtest/gtest.h>

#include "ns_handle.h"
#include "ns_test_fabric.h"

namespace mrc::perf {
namespace {

class NsProgressThreads : public NsFabricSuite<NsProgressThreads> {
 public:
  static constexpr TestFabricSpec kFabric{"mrcp", 2, /*gso=*/true};
};

TEST_F(NsProgressThreads, Write_TwoThreadsEveryByteVerified) {
  SessionOptions o;
  o.msg_bytes = 256 << 10;
  o.outstanding = 4;
  o.duration_s = 2;
  o.quiet = true;
  o.progress_threads = 2;
  auto r = run_session(fabric_handle(*fab_), o);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r->mrc.has_value());
  EXPECT_TRUE(r->data_ok) << r->first_error;
  EXPECT_EQ(r->mrc->mismatches, 0u);
  EXPECT_EQ(r->mrc->errors, 0u) << r->mrc->first_error;
  EXPECT_GT(r->mrc->messages, 0u);
  // Thread 1 serves plane 1: the server's data and the client's ACKs on it came through it.
  EXPECT_GT(r->mrc->server_counters.other_thread_rounds, 0u);
  EXPECT_GT(r->mrc->client_counters.other_thread_rounds, 0u);
  EXPECT_GT(r->mrc->server_counters.datagrams_received, 0u);
}

}  // namespace
}  // namespace mrc::perf

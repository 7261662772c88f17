// Tests of tools/mrc-sim/sink.h: every verdict, and copies outside the sink.
#include "sink.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace mrc::msim {
namespace {

struct SinkFixture : ::testing::Test {
  SinkFixture() : source(4096), sink(source) {
    std::iota(source.begin(), source.end(), 0);
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7 + (i >> 8));
    // Message 0: 100 bytes to host 1 from offset 10; message 1: 50 bytes to host 0 from 500;
    // message 2: 30 bytes to host 1 from 1000.
    const uint32_t dst[] = {1, 0, 1};
    const uint64_t len[] = {100, 50, 30}, off[] = {10, 500, 1000};
    sink.layout(2, dst, len, off);
    sink.activate();
  }
  void put(uint64_t msg, uint64_t x, uint64_t n, uint64_t src_off) {
    VerifySink::copy(reinterpret_cast<uint8_t*>(sink.dst_addr(msg)) + x, &source[src_off], n);
  }
  std::vector<uint8_t> source;
  VerifySink sink;
};

TEST_F(SinkFixture, WindowsHoldTheirHostsMessages) {
  EXPECT_EQ(sink.window_bytes(0), 50u);
  EXPECT_EQ(sink.window_bytes(1), 130u);
  const auto w1 = reinterpret_cast<uint64_t>(sink.window(1));
  EXPECT_GE(sink.dst_addr(0), w1);
  EXPECT_GE(sink.dst_addr(2), w1);
  EXPECT_LT(sink.dst_addr(2) + 30, w1 + 131);
}

TEST_F(SinkFixture, EveryByteOnceInAnyOrderIsOk) {
  put(0, 60, 40, 70);
  put(0, 0, 60, 10);
  EXPECT_EQ(sink.check(0), VerifySink::Verdict::kOk);
  EXPECT_EQ(sink.placed_bytes(), 100u);
  EXPECT_EQ(sink.check(1), VerifySink::Verdict::kLost);  // nothing yet
}

TEST_F(SinkFixture, MissingBytesAreLost) {
  put(0, 0, 60, 10);
  EXPECT_EQ(sink.check(0), VerifySink::Verdict::kLost);
}

TEST_F(SinkFixture, ABytePlacedTwiceIsDuplicated) {
  put(0, 0, 60, 10);
  put(0, 60, 40, 70);
  put(0, 60, 40, 70);
  EXPECT_EQ(sink.check(0), VerifySink::Verdict::kDuplicated);
}

TEST_F(SinkFixture, OneTwiceAndAnotherNeverIsDuplicatedNotOk) {
  // 100 bytes in all, but [0, 20) twice and [80, 100) never.
  put(0, 0, 20, 10);
  put(0, 0, 20, 10);
  put(0, 20, 60, 30);
  EXPECT_EQ(sink.check(0), VerifySink::Verdict::kDuplicated);
}

TEST_F(SinkFixture, WrongBytesOrAnotherMessagesBytesAreCorrupted) {
  put(2, 0, 30, 1000);
  EXPECT_EQ(sink.check(2), VerifySink::Verdict::kOk);
  put(0, 0, 100, 11);  // one byte off in the source
  EXPECT_EQ(sink.check(0), VerifySink::Verdict::kCorrupted);
  EXPECT_EQ(sink.bad_writes(), 1u);
}

TEST_F(SinkFixture, AWritePastItsMessageIsCorrupted) {
  put(1, 40, 20, 540);  // message 1 is 50 bytes
  EXPECT_EQ(sink.check(1), VerifySink::Verdict::kCorrupted);
}

TEST_F(SinkFixture, CopiesOutsideTheSinkAreCopied) {
  uint8_t buf[16] = {};
  VerifySink::copy(buf, source.data() + 5, 16);
  EXPECT_EQ(std::memcmp(buf, source.data() + 5, 16), 0);
  EXPECT_EQ(sink.placed_bytes(), 0u);
}

}  // namespace
}  // namespace mrc::msim

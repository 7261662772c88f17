// A small namespace fabric for the tests that run sessions on real namespaces: `hosts` hosts,
// 2 planes x 2 spines, one host per T0 and 1 Gbit/s ports unless given, prefix unique to the
// process.
// Threading: test thread only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mrc/common/netns.h"
#include "mrc/common/result.h"
#include "nsfabric.h"

// MRC_TEST_ASAN: defined under AddressSanitizer, which keeps freed memory in quarantine (256 MiB
// by default): there VmRSS measures the quarantine, not the program, so memory checks by VmRSS
// are left out (limits_test.cc's heap accounting covers the engine under ASan too).
#if defined(__SANITIZE_ADDRESS__)
#define MRC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MRC_TEST_ASAN 1
#endif
#endif
// MRC_TEST_TSAN: the same for ThreadSanitizer (tests that preload the shim into stock binaries
// skip under either).
#if defined(__SANITIZE_THREAD__)
#define MRC_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MRC_TEST_TSAN 1
#endif
#endif

namespace mrc::perf {

inline Result<nsfabric::NsFabric, std::string> make_test_fabric(
    const std::string& tag, uint32_t hosts, bool gso, uint32_t hosts_per_t0 = 1,
    double port_gbps = 1, uint32_t planes = 2, uint32_t spines = 2) {
  srv6::FabricConfig cfg;
  cfg.hosts = hosts;
  cfg.planes = planes;
  cfg.spines = spines;
  cfg.hosts_per_t0 = hosts_per_t0;
  cfg.host_port_gbps = port_gbps;
  auto f = srv6::Fabric::make(cfg);
  if (!f.ok()) return Err(f.error());
  nsfabric::Options o;
  o.prefix = tag + std::to_string(::getpid());
  o.gso = gso;
  return nsfabric::NsFabric::up(*f, o);
}

/// Named namespaces under /run/netns that start with `prefix` + "-": what a removed fabric must
/// not have left behind (tests expect this to be empty).
inline std::vector<std::string> namespaces_left(const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix + "-", 0) == 0) out.push_back(n);
  }
  return out;
}

/// make_test_fabric's arguments.
struct TestFabricSpec {
  const char* tag = "mrct";
  uint32_t hosts = 2;
  bool gso = true;
  uint32_t hosts_per_t0 = 1;
  double port_gbps = 1;
  uint32_t planes = 2;
  uint32_t spines = 2;
};

/// A fixture whose suite shares one fabric, made from S::kFabric (a public TestFabricSpec)
/// before the suite's first test and removed after its last, with no namespace left behind;
/// each test skips, saying why, where namespaces cannot be made.
/// Use: class MySuite : public NsFabricSuite<MySuite> { public: static constexpr ... kFabric
template <class S>
class NsFabricSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (auto ok = mrc::netns_supported(); !ok.ok()) {
      skip_ = ok.error();
      return;
    }
    constexpr TestFabricSpec f = S::kFabric;
    auto up =
        make_test_fabric(f.tag, f.hosts, f.gso, f.hosts_per_t0, f.port_gbps, f.planes, f.spines);
    ASSERT_TRUE(up.ok()) << up.error();
    fab_.emplace(std::move(up).value());
  }

  static void TearDownTestSuite() {
    if (!fab_) return;
    const std::string prefix = fab_->options().prefix;
    EXPECT_TRUE(fab_->down().ok());
    fab_.reset();
    EXPECT_EQ(namespaces_left(prefix), std::vector<std::string>{}) << "namespaces left behind";
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(fab_.has_value());
  }

  static inline std::optional<nsfabric::NsFabric> fab_;
  static inline std::string skip_;
};

}  // namespace mrc::perf

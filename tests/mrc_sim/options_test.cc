// Tests of tools/mrc-sim/options.h and faults.h: derived defaults, and bad input named clearly.
#include "options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "faults.h"

namespace mrc::msim {
namespace {

// Parses `args` (after the program name); returns the outcome and the error.
std::pair<ParseOutcome, std::string> parse(std::vector<std::string> args, Options* out = nullptr) {
  std::vector<const char*> argv = {"mrc-sim"};
  for (const auto& a : args) argv.push_back(a.c_str());
  Options o;
  std::string err;
  const ParseOutcome r = parse_cli(static_cast<int>(argv.size()), argv.data(), o, err);
  if (out) *out = o;
  return {r, err};
}

bool bad_with(std::vector<std::string> args, const std::string& needle) {
  auto [r, err] = parse(std::move(args));
  return r == ParseOutcome::kBad && err.find(needle) != std::string::npos;
}

TEST(ParseCli, DefaultsMakeTheT1NonBlocking) {
  Options o;
  ASSERT_EQ(parse({"--hosts", "64", "--host-gbps", "100", "--uplink-gbps", "200"}, &o).first,
            ParseOutcome::kRun);
  EXPECT_EQ(o.hosts_per_t0, 8u);
  EXPECT_EQ(o.spines, 4u);  // 8 x 100 / 200
  EXPECT_EQ(o.planes, 4u);
}

TEST(ParseCli, TransportsAndSizes) {
  Options o;
  ASSERT_EQ(
      parse({"--transport", "mrc,plane,ecmp,mrc-notrim", "--bytes", "64K", "--msg-bytes", "1MiB"},
            &o)
          .first,
      ParseOutcome::kRun);
  ASSERT_EQ(o.transports.size(), 4u);
  EXPECT_EQ(o.transports[2], Transport::kEcmp);
  EXPECT_EQ(o.bytes, 65536u);
  EXPECT_EQ(o.msg_bytes, 1u << 20);
}

TEST(ParseCli, DelayDecreaseOnUnlessSwitchedOff) {
  Options o;
  ASSERT_EQ(parse({}, &o).first, ParseOutcome::kRun);
  EXPECT_TRUE(o.delay_decrease);
  ASSERT_EQ(parse({"--no-delay-decrease"}, &o).first, ParseOutcome::kRun);
  EXPECT_FALSE(o.delay_decrease);
}

TEST(ParseCli, BadInputIsNamed) {
  EXPECT_TRUE(bad_with({"--pattern", "broadcast"}, "--pattern 'broadcast'"));
  EXPECT_TRUE(bad_with({"--transport", "mrc,roce"}, "--transport 'roce'"));
  EXPECT_TRUE(bad_with({"--bytes", "12XB"}, "not a size"));
  EXPECT_TRUE(bad_with({"--hosts", "1"}, "--hosts"));
  EXPECT_TRUE(bad_with({"--hosts", "8", "--hosts-per-t0", "9"}, "--hosts-per-t0"));
  EXPECT_TRUE(bad_with({"--spines", "300"}, "--spines"));
  EXPECT_TRUE(bad_with({"--mtu", "1500"}, "--mtu"));
  EXPECT_TRUE(bad_with({"--png", "x.png"}, "--png needs --csv"));
  EXPECT_TRUE(bad_with({"--no-such-flag"}, "no-such-flag"));
  EXPECT_TRUE(bad_with({"--pattern", "incast", "--hosts", "4", "--incast-senders", "4"},
                       "--incast-senders"));
}

TEST(ParseSize, Units) {
  uint64_t v = 0;
  EXPECT_TRUE(parse_size("4K", v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(parse_size("3GiB", v));
  EXPECT_EQ(v, 3ull << 30);
  EXPECT_TRUE(parse_size("100", v));
  EXPECT_EQ(v, 100u);
  EXPECT_FALSE(parse_size("", v));
  EXPECT_FALSE(parse_size("M", v));
  EXPECT_FALSE(parse_size("-5", v));
  EXPECT_FALSE(parse_size("99999999999999999999", v));
}

TEST(ParseFault, TimesInUnitsAndShareOfIdeal) {
  const FaultScope sc{4, 8, 8, 0.002};
  auto f = parse_fault("50% t1-down 1 3", sc).value();
  EXPECT_EQ(f.at, engine::Time{1'000'000});
  EXPECT_EQ(f.op, Fault::Op::kT1Down);
  EXPECT_EQ(f.plane, 1);
  EXPECT_EQ(f.spine, 3u);
  EXPECT_EQ(parse_fault("300us t0-down 0 7", sc).value().at, engine::Time{300'000});
  auto fl = parse_fault("1ms flap 2 1 4 100us 3ms", sc).value();
  EXPECT_EQ(fl.period, engine::Duration{100'000});
  EXPECT_EQ(fl.until, engine::Time{3'000'000});
  EXPECT_DOUBLE_EQ(parse_fault("0 loss 0 0 0 0.01", sc).value().prob, 0.01);
  EXPECT_FALSE(parse_fault("0 trimming off", sc).value().on);
}

TEST(ParseFault, MistakesAreNamed) {
  const FaultScope sc{4, 8, 8, 0.002};
  auto err = [&](const char* t) { return parse_fault(t, sc).error(); };
  EXPECT_NE(err("1ms t2-down 0 0").find("unknown fault 't2-down'"), std::string::npos);
  EXPECT_NE(err("1ms t1-down 4 0").find("plane '4'"), std::string::npos);
  EXPECT_NE(err("1ms t1-down 0 8").find("spine '8'"), std::string::npos);
  EXPECT_NE(err("1ms t0-down 0 8").find("T0 '8'"), std::string::npos);
  EXPECT_NE(err("1ms t1-down 0").find("usage: TIME t1-down PLANE SPINE"), std::string::npos);
  EXPECT_NE(err("soon t1-down 0 0").find("'soon' is not a time"), std::string::npos);
  EXPECT_NE(err("1ms loss 0 0 0 2").find("not in [0, 1]"), std::string::npos);
  EXPECT_NE(err("1ms flap 0 0 0 100us 1ms").find("UNTIL must come after"), std::string::npos);
}

}  // namespace
}  // namespace mrc::msim

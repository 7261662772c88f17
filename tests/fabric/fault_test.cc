// Tests for tools/mrc-fabric/fault.cc: the fault language, both ways, and its errors.
#include "fault.h"

#include <gtest/gtest.h>

namespace mrc::nsfabric {
namespace {

ElementFault parse_ok(const std::string& text) {
  auto f = parse_fault(text);
  EXPECT_TRUE(f.ok()) << text << ": " << (f.ok() ? "" : f.error());
  return f.ok() ? std::get<ElementFault>(*f) : ElementFault{};
}

std::string parse_error(const std::string& text) {
  auto f = parse_fault(text);
  EXPECT_FALSE(f.ok()) << text;
  return f.ok() ? "" : f.error();
}

TEST(FaultParse, Targets) {
  ElementFault f = parse_ok("down t0 p1 t2");
  EXPECT_EQ(f.action, Action::kDown);
  EXPECT_EQ(f.target, (Target{Target::Kind::kT0, 1, 2, 0, 0}));
  EXPECT_EQ(parse_ok("up t0 h3 p2").target, (Target{Target::Kind::kT0OfHost, 2, 0, 0, 3}));
  EXPECT_EQ(parse_ok("blackhole t1 p0 s7").target, (Target{Target::Kind::kT1, 0, 0, 7, 0}));
  EXPECT_EQ(parse_ok("down link p3 t1 s2").target, (Target{Target::Kind::kUplink, 3, 1, 2, 0}));
  EXPECT_EQ(parse_ok("  down   link h4 p1 ").target, (Target{Target::Kind::kHostLink, 1, 0, 0, 4}));
}

TEST(FaultParse, Arguments) {
  EXPECT_DOUBLE_EQ(parse_ok("loss link p0 t0 s1 50").loss_pct, 50);
  EXPECT_DOUBLE_EQ(parse_ok("loss link h0 p0 0.5%").loss_pct, 0.5);
  EXPECT_DOUBLE_EQ(parse_ok("loss link h0 p0 0").loss_pct, 0);
  EXPECT_EQ(parse_ok("flap link p1 t0 s0 200").period_ms, 200u);
  EXPECT_EQ(parse_ok("unflap link p1 t0 s0").action, Action::kUnflap);
}

TEST(FaultParse, ToString_RoundTrips) {
  for (const char* text :
       {"down t0 p1 t2", "up t0 h3 p2", "blackhole t1 p0 s7", "unblackhole t1 p0 s7",
        "down link p3 t1 s2", "up link h4 p1", "loss link p0 t0 s1 12.25", "loss link h0 p0 0",
        "flap link p1 t0 s0 200", "unflap link h1 p0"}) {
    auto f = parse_fault(text);
    ASSERT_TRUE(f.ok()) << text;
    EXPECT_EQ(to_string(*f), text);
  }
}

TEST(FaultParse, Errors_NameTheBadWord) {
  EXPECT_EQ(parse_error("down t1 x"), "expected p<N> after t1, got 'x'");
  EXPECT_EQ(parse_error("down t1 p0"), "expected s<N> after t1 p0, got end of input");
  EXPECT_EQ(parse_error("down t0 p0 s1"), "expected t<N> after t0 p0, got 's1'");
  EXPECT_EQ(parse_error("down t0 q1"), "expected p<N> or h<N> after t0, got 'q1'");
  EXPECT_EQ(parse_error("down link h1 t0"), "expected p<N> after link h1, got 't0'");
  EXPECT_EQ(parse_error("down link p1 t0"), "expected s<N> after link p1 t0, got end of input");
  EXPECT_EQ(parse_error("down t2 p0 t0"), "expected t0, t1 or link after down, got 't2'");
  EXPECT_EQ(parse_error("down t0 p99999999999 t0"),
            "expected p<N> or h<N> after t0, got 'p99999999999'");
  EXPECT_EQ(parse_error("down t0 p0 t0 now"), "unexpected 'now' after 'down t0 p0 t0'");
  EXPECT_EQ(parse_error("explode t0 p0 t0"),
            "unknown fault 'explode' (expected down, up, blackhole, unblackhole, loss, flap, "
            "unflap, degrade, delay, corrupt, reorder, trim or untrim)");
  EXPECT_NE(parse_error("").find("empty fault"), std::string::npos);
  EXPECT_EQ(parse_error("loss t1 p0 s0 5"),
            "loss needs a link (link p<P> t<T> s<S> or link h<H> p<P>), got t1 p0 s0");
  EXPECT_EQ(parse_error("loss link h0 p0 101"),
            "expected a loss percentage 0..100 after loss link h0 p0, got '101'");
  EXPECT_EQ(parse_error("loss link h0 p0"),
            "expected a loss percentage 0..100 after loss link h0 p0, got end of input");
  EXPECT_EQ(parse_error("flap link h0 p0 5"),
            "expected a flap period in ms (>= 20) after flap link h0 p0, got '5'");
}

TEST(FaultParse, Trim_RoundTripAndErrors) {
  auto f = parse_fault("trim link h1 p0 1.5 32");
  ASSERT_TRUE(f.ok()) << f.error();
  const auto& t = std::get<TrimFault>(*f);
  EXPECT_TRUE(t.on);
  EXPECT_EQ(t.target.kind, Target::Kind::kHostLink);
  EXPECT_DOUBLE_EQ(t.gbps, 1.5);
  EXPECT_EQ(t.trim_kb, 32u);
  EXPECT_EQ(t.ecn_kb, 16u);
  EXPECT_EQ(to_string(*f), "trim link h1 p0 1.5 32 16");
  auto u = parse_fault("untrim link p0 t1 s2");
  ASSERT_TRUE(u.ok()) << u.error();
  EXPECT_EQ(to_string(*u), "untrim link p0 t1 s2");
  EXPECT_EQ(parse_error("trim t1 p0 s0 2"),
            "trim needs a link (link p<P> t<T> s<S> or link h<H> p<P>), got t1 p0 s0");
  EXPECT_EQ(parse_error("trim link h0 p0"),
            "expected the port rate in Gbit/s (> 0) after trim link h0 p0, got end of input");
  EXPECT_EQ(parse_error("trim link h0 p0 2 8 9"),
            "expected ecn_kb (KiB <= trim_kb) after trim_kb, got '9'");
  EXPECT_EQ(parse_error("untrim link h0 p0 2"), "unexpected '2' after 'untrim link h0 p0'");
}

TEST(FaultParse, GrayFaults_ArgumentsAndRoundTrip) {
  ElementFault d = parse_ok("degrade link h0 p1 0.25");
  EXPECT_EQ(d.action, Action::kDegrade);
  EXPECT_DOUBLE_EQ(d.gbps, 0.25);
  EXPECT_EQ(parse_ok("delay link p0 t0 s1 500").us, 500u);
  EXPECT_DOUBLE_EQ(parse_ok("corrupt link h1 p0 0.5%").loss_pct, 0.5);
  ElementFault r = parse_ok("reorder link h1 p0 10");
  EXPECT_DOUBLE_EQ(r.loss_pct, 10);
  EXPECT_EQ(r.us, kDefaultReorderUs);
  EXPECT_EQ(parse_ok("reorder link h1 p0 10 50").us, 50u);
  ElementFault l = parse_ok("loss link h1 p0 5 down");
  EXPECT_EQ(l.dir, Direction::kDown);
  EXPECT_EQ(parse_ok("loss link h1 p0 5").dir, Direction::kBoth);
  ElementFault b = parse_ok("blackhole link p1 t0 s0 up");
  EXPECT_EQ(b.action, Action::kBlackhole);
  EXPECT_EQ(b.dir, Direction::kUp);
  EXPECT_EQ(parse_ok("blackhole link p1 t0 s0").dir, Direction::kBoth);
  for (const char* text :
       {"degrade link h0 p1 0.25", "degrade link h0 p1 0", "delay link p0 t0 s1 500",
        "delay link p0 t0 s1 0", "corrupt link h1 p0 0.5", "corrupt link h1 p0 0",
        "reorder link h1 p0 10 200", "reorder link h1 p0 0", "loss link h1 p0 5 down",
        "loss link p0 t1 s0 0 up", "blackhole link p1 t0 s0 up", "unblackhole link h0 p0 down",
        "blackhole link h0 p0"}) {
    auto f = parse_fault(text);
    ASSERT_TRUE(f.ok()) << text << ": " << f.error();
    EXPECT_EQ(to_string(*f), text);
  }
}

TEST(FaultParse, GrayFaults_ErrorsNameTheBadWord) {
  EXPECT_EQ(parse_error("degrade t1 p0 s0 1"),
            "degrade needs a link (link p<P> t<T> s<S> or link h<H> p<P>), got t1 p0 s0");
  const std::string rate =
      "expected the degraded rate in Gbit/s (1e-06..800, 0 restores) after "
      "degrade link h0 p0, got ";
  EXPECT_EQ(parse_error("degrade link h0 p0 fast"), rate + "'fast'");
  EXPECT_EQ(parse_error("degrade link h0 p0 -1"), rate + "'-1'");
  EXPECT_EQ(parse_error("degrade link h0 p0 900"), rate + "'900'") << "faster than tbf shapes";
  EXPECT_EQ(parse_error("degrade link h0 p0 1e-12"), rate + "'1e-12'") << "below 1 bit/s";
  EXPECT_EQ(parse_error("degrade link h0 p0 inf"), rate + "'inf'");
  EXPECT_EQ(parse_error("delay link h0 p0"),
            "expected the added delay in us (0..1000000, 0 removes) after delay link h0 p0, got "
            "end of input");
  EXPECT_EQ(parse_error("delay link h0 p0 2000000"),
            "expected the added delay in us (0..1000000, 0 removes) after delay link h0 p0, got "
            "'2000000'");
  EXPECT_EQ(parse_error("corrupt link h0 p0 150"),
            "expected a percentage 0..100 after corrupt link h0 p0, got '150'");
  EXPECT_EQ(parse_error("reorder link h0 p0 5 0"),
            "expected the hold time in us (1..1000000) after reorder link h0 p0 5, got '0'");
  EXPECT_EQ(parse_error("loss link h0 p0 5 sideways"),
            "expected up or down (the direction) after loss link h0 p0 5, got 'sideways'");
  EXPECT_EQ(parse_error("blackhole link h0 p0 left"),
            "expected up or down (the direction) after blackhole link h0 p0, got 'left'");
  EXPECT_EQ(parse_error("blackhole t1 p0 s0 up"), "unexpected 'up' after 'blackhole t1 p0 s0'");
  EXPECT_EQ(parse_error("delay link h0 p0 5 up"), "unexpected 'up' after 'delay link h0 p0 5'");
}

TEST(Repairs, GrayFaults_EachUndoneOnItsOwn) {
  std::vector<Fault> schedule;
  for (const char* text :
       {"loss link h0 p1 5 up", "loss link h0 p1 3 down", "loss link h0 p1 0 down",
        "blackhole link p0 t0 s1 down", "degrade link h1 p0 0.5", "delay link h1 p0 300",
        "corrupt link h1 p0 1", "reorder link h1 p0 5 100", "down link h1 p0"}) {
    auto f = parse_fault(text);
    ASSERT_TRUE(f.ok()) << f.error();
    schedule.push_back(*f);
  }
  std::vector<std::string> got;
  for (const Fault& f : repairs(schedule)) got.push_back(to_string(f));
  EXPECT_EQ(got, (std::vector<std::string>{"loss link h0 p1 0 up", "unblackhole link p0 t0 s1 down",
                                           "degrade link h1 p0 0", "delay link h1 p0 0",
                                           "corrupt link h1 p0 0", "reorder link h1 p0 0",
                                           "up link h1 p0"}));
}

TEST(Repairs, LastActionPerTargetReversed) {
  std::vector<Fault> schedule;
  for (const char* text : {"down t0 h0 p2", "up t0 h0 p2", "down t1 p1 s2", "loss link h0 p1 1.5",
                           "flap link p0 t0 s1 200", "trim link h1 p0 1 32", "blackhole t1 p0 s0",
                           "loss link p1 t0 s0 2", "loss link p1 t0 s0 0"}) {
    auto f = parse_fault(text);
    ASSERT_TRUE(f.ok()) << f.error();
    schedule.push_back(*f);
  }
  std::vector<std::string> got;
  for (const Fault& f : repairs(schedule)) got.push_back(to_string(f));
  EXPECT_EQ(got, (std::vector<std::string>{"up t1 p1 s2", "loss link h0 p1 0",
                                           "unflap link p0 t0 s1", "untrim link h1 p0",
                                           "unblackhole t1 p0 s0"}));
}

}  // namespace
}  // namespace mrc::nsfabric

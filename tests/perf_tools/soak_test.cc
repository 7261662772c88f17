// The soak run's fault schedule (tools/mrc-perf/soak.h): every fault parses, each is undone
// before the next one starts, all are undone before the end, every kind shows up, and the
// same seed gives the same schedule.
#include "soak.h"

#include <gtest/gtest.h>

#include <set>

#include "fault.h"

namespace mrc::perf {
namespace {

srv6::Fabric fabric() {
  srv6::FabricConfig c;
  c.hosts = 2;
  c.planes = 4;
  c.spines = 4;
  c.hosts_per_t0 = 1;
  return *srv6::Fabric::make(c);
}

TEST(SoakSchedule, OneFaultAtATime_AllRepaired_EveryKind) {
  SoakPlan plan;
  plan.duration_s = 1800;
  plan.seed = 7;
  const auto s = soak_schedule(fabric(), 0, 1, plan);
  ASSERT_GT(s.size(), 300u);
  ASSERT_EQ(s.size() % 2, 0u);
  std::set<std::string> kinds;
  double last = 0;
  for (size_t i = 0; i < s.size(); i += 2) {
    const TimedFault& f = s[i];
    const TimedFault& r = s[i + 1];
    EXPECT_GE(f.t_s, last);
    EXPECT_GT(r.t_s, f.t_s);
    EXPECT_LE(r.t_s, plan.duration_s - 1);
    last = r.t_s;
    auto pf = nsfabric::parse_fault(f.fault);
    auto pr = nsfabric::parse_fault(r.fault);
    ASSERT_TRUE(pf.ok()) << f.fault << ": " << pf.error();
    ASSERT_TRUE(pr.ok()) << r.fault << ": " << pr.error();
    // The repair is exactly what the fault language says undoes this fault.
    const auto rep = nsfabric::repairs({*pf});
    ASSERT_EQ(rep.size(), 1u) << f.fault;
    EXPECT_EQ(nsfabric::to_string(rep[0]), r.fault) << f.fault;
    kinds.insert(f.fault.substr(0, f.fault.find(' ', f.fault.find(' ') + 1)));
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"blackhole t1", "down link", "down t0", "down t1",
                                          "flap link", "loss link", "trim link"}));
  EXPECT_EQ(soak_schedule(fabric(), 0, 1, plan).size(), s.size());
  EXPECT_EQ(soak_schedule(fabric(), 0, 1, plan)[10].fault, s[10].fault);
  plan.trimming = false;
  for (const auto& f : soak_schedule(fabric(), 0, 1, plan))
    EXPECT_EQ(f.fault.find("trim"), std::string::npos);
}

}  // namespace
}  // namespace mrc::perf

// Tests for tools/mrc-perf/matrix.cc and report.cc's time_back_ms: the matrix's faults and
// their repairs, its cells and table.
#include "matrix.h"

#include <gtest/gtest.h>

#include "fault.h"

namespace mrc::perf {
namespace {

// 10 ms intervals (t_s is an interval's end) at `gbps(t)`.
Series series(double end_s, double (*gbps)(double)) {
  Series s;
  s.name = "mrc";
  for (int i = 1; i * 0.01 <= end_s + 1e-9; ++i)
    s.intervals.push_back(Sample{i * 0.01, gbps(i * 0.01), 0.01});
  return s;
}

TEST(MatrixFaults, EachParsesAndItsRepairIsWhatRepairsComputes) {
  srv6::FabricConfig cfg;
  cfg.hosts = 2;
  cfg.planes = 4;
  cfg.spines = 4;
  cfg.hosts_per_t0 = 1;
  cfg.host_port_gbps = 2;
  auto f = srv6::Fabric::make(cfg);
  ASSERT_TRUE(f.ok()) << f.error();
  auto faults = matrix_faults(*f, 0, 1);
  ASSERT_TRUE(faults.ok()) << faults.error();
  EXPECT_EQ(faults->size(), 13u);
  for (const MatrixFault& m : *faults) {
    auto fault = nsfabric::parse_fault(m.fault);
    ASSERT_TRUE(fault.ok()) << m.fault << ": " << fault.error();
    const auto repair = nsfabric::repairs({*fault});
    ASSERT_EQ(repair.size(), 1u) << m.fault;
    EXPECT_EQ(nsfabric::to_string(repair[0]), m.repair) << m.kind;
  }
  cfg.planes = 2;
  auto small = srv6::Fabric::make(cfg);
  ASSERT_TRUE(small.ok()) << small.error();
  auto refused = matrix_faults(*small, 0, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("4 planes"), std::string::npos) << refused.error();
}

TEST(TimeBack, FirstFullWindowAtTheShare) {
  // Healthy 8 until 1 s, 2 while faulted, 4 for 200 ms after the repair at 2 s, then 8.
  Series s = series(3.0, [](double t) {
    return t <= 1.0 ? 8.0 : t <= 2.0 ? 2.0 : t <= 2.2 ? 4.0 : 8.0;
  });
  EXPECT_NEAR(time_back_ms(s, 8, 2.0), 200, 10.5);  // one interval of float rounding
  EXPECT_NEAR(time_back_ms(s, 8, 2.0, 0.5), 0, 1e-6) << "4 is half of healthy at once";
  Series never = series(3.0, [](double t) { return t <= 1.0 ? 8.0 : 2.0; });
  EXPECT_EQ(time_back_ms(never, 8, 2.0), -1);
}

TEST(MatrixCell, SharesOfTheSecondsBeforeTheFault) {
  // Ramp-up at 2 for 1 s, healthy 8 from 1 s, fault at 3 s (4), repair at 6 s, back at 6.1 s.
  Series s = series(8.0, [](double t) {
    return t <= 1.0 ? 2.0 : t <= 3.0 ? 8.0 : t <= 6.0 ? 4.0 : t <= 6.1 ? 0.0 : 8.0;
  });
  s.faults = {{3.0, "down t0 h0 p2", ""}, {6.0, "up t0 h0 p2", ""}};
  const MatrixCell c = matrix_cell(s);
  EXPECT_NEAR(c.healthy_gbps, 8, 1e-9) << "the ramp-up is not healthy";
  EXPECT_NEAR(c.during, 0.5, 1e-9);
  EXPECT_NEAR(c.low100, 0.5, 1e-9);
  EXPECT_NEAR(c.stall_ms, 100, 10.5);
  EXPECT_NEAR(c.back_ms, 100, 10.5);
  MatrixRow row{{"T0 of a plane down", "down t0 h0 p2", "up t0 h0 p2"}, {"mrc"}, {c}, ""};
  MatrixCell never = c;
  never.back_ms = -1;
  row.transports.push_back("tcp");
  row.cells.push_back(never);
  const std::string t = matrix_table({row});
  EXPECT_NE(t.find("| T0 of a plane down (`down t0 h0 p2`) | 0.50 | 0.50 | "), std::string::npos)
      << t;
  EXPECT_NE(t.find("ms | - |\n"), std::string::npos) << "never back: '-'\n" << t;
  EXPECT_NE(t.find("| mrc during | low 100 ms | stall | back | tcp during |"), std::string::npos)
      << t;
}

// A run that ended before its repair (--duration too short) has no cell: n/a, never 0.00.
TEST(MatrixCell, RepairNeverApplied_NotComputedPrintedNa) {
  Series s = series(5.0, [](double t) { return t <= 3.0 ? 8.0 : 4.0; });
  s.faults = {{3.0, "down t0 h0 p2", ""}};
  const MatrixCell c = matrix_cell(s);
  EXPECT_FALSE(c.computed);
  MatrixRow row{{"T0 of a plane down", "down t0 h0 p2", "up t0 h0 p2"}, {"mrc"}, {c}, ""};
  const std::string t = matrix_table({row});
  EXPECT_NE(t.find("(`down t0 h0 p2`) | n/a | n/a | n/a | n/a |"), std::string::npos) << t;
  EXPECT_EQ(t.find("0.00 |"), std::string::npos) << t;
}

TEST(CheckMatrixOptions, DefaultsPass_OverriddenOptionsAndShortDurationRefused) {
  EXPECT_TRUE(check_matrix_options(kMatrixDuration, {"--matrix", "--rate"}).ok());
  for (const char* o : {"--fault", "--no-mrc", "--csv", "--png", "--soak"}) {
    const auto r = check_matrix_options(kMatrixDuration, {"--matrix", o});
    ASSERT_FALSE(r.ok()) << o;
    EXPECT_NE(r.error().find(o), std::string::npos) << r.error();
  }
  const auto shorter = check_matrix_options(kMatrixRepairAt + 0.5, {"--matrix", "--duration"});
  ASSERT_FALSE(shorter.ok());
  EXPECT_NE(shorter.error().find("--duration 6.5"), std::string::npos) << shorter.error();
  EXPECT_FALSE(check_matrix_options(kMatrixRepairAt + 1, {"--matrix", "--duration"}).ok());
  EXPECT_TRUE(check_matrix_options(kMatrixRepairAt + 1.5, {"--matrix", "--duration"}).ok());
}

}  // namespace
}  // namespace mrc::perf

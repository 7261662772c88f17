// Open MPI across two hosts of the namespace fabric: mpirun (in host 0's namespace) starts one
// rank per host (mpi_agent.sh runs host 1's orted with ip netns exec; mpi_rank.sh gives each
// rank its host's MRC config and the verbs shim) and mpi_check.c ping-pongs 1 B .. 1 MiB and
// allreduces int and double vectors, checking every byte.
//   - MpiCheck_TcpBtl_AcrossHosts: over Open MPI's TCP transport on the management network, not
//     MRC: the launcher and the program, which the MRC run below uses as they are.
//   - MpiCheck_UcxRcVerbs_AcrossHosts: Open MPI's UCX PML over rc_verbs on mrc0. UCX wires
//     rc_verbs up over UD (ud_verbs), which mrc0 does not have yet: skips saying so while UCX's
//     ud_verbs does not open on mrc0 (docs/verbs-shim.md, "UCX and Open MPI").
// Both ranks report the host name "vm" (one UTS namespace), so shared memory stays off
// (btl self + the transport under test). Skips without Open MPI, without namespaces, under
// sanitizers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "ns_test_fabric.h"
#include "ns_tools.h"

#ifndef MRC_MPI_CHECK
#define MRC_MPI_CHECK ""
#endif

namespace mrc::verbs {
namespace {

using namespace std::chrono_literals;

std::string mpi_missing() {
#if defined(MRC_TEST_ASAN) || defined(MRC_TEST_TSAN)
  return "built with a sanitizer: the shim cannot be preloaded into stock binaries";
#endif
  if (std::string(MRC_MPI_CHECK).empty() || ::access("/usr/bin/mpirun", X_OK) != 0)
    return "Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev)";
  return "";
}

class NsMpi : public perf::NsFabricSuite<NsMpi> {
 public:
  static constexpr perf::TestFabricSpec kFabric{.tag = "mrcmp"};
  static void SetUpTestSuite() {
    if (mpi_missing().empty()) NsFabricSuite::SetUpTestSuite();
  }

 protected:
  void SetUp() override {
    if (const std::string why = mpi_missing(); !why.empty()) GTEST_SKIP() << why;
    NsFabricSuite::SetUp();
  }
  // mpirun in host 0's namespace with `mca` (and `env` for the ranks); its output.
  static Child mpirun(const std::vector<std::string>& mca,
                      const std::vector<std::string>& env = {}) {
    const std::string ns0 = fab_->host_netns(0);
    const std::string prefix = ns0.substr(0, ns0.rfind("-h"));
    const std::string dir = MRC_MPI_SCRIPTS;
    std::vector<std::string> argv = {"mpirun",
                                     "--allow-run-as-root",
                                     "-np",
                                     "2",
                                     "--host",
                                     nsfabric::mgmt_address(0) + "," + nsfabric::mgmt_address(1),
                                     "--mca",
                                     "plm_rsh_agent",
                                     dir + "/mpi_agent.sh",
                                     "--mca",
                                     "oob_tcp_if_include",
                                     "mgmt0"};
    argv.insert(argv.end(), mca.begin(), mca.end());
    for (const auto& e : env) argv.insert(argv.end(), {"-x", e});
    argv.insert(argv.end(), {dir + "/mpi_rank.sh", MRC_MPI_CHECK, "1048576", "3"});
    Child c = spawn(
        ns0, {"MRC_MPI_PREFIX=" + prefix, std::string("MRC_MPI_SHIM=") + MRC_VERBS_SHIM}, argv);
    c.wait(120s);
    return c;
  }
  static void expect_ok(const Child& c) {
    EXPECT_EQ(c.rc, 0) << c.out;
    EXPECT_NE(c.out.find("mpi_check: OK"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("rank in " + fab_->host_netns(0)), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("rank in " + fab_->host_netns(1)), std::string::npos) << c.out;
  }
};

TEST_F(NsMpi, MpiCheck_TcpBtl_AcrossHosts) {
  expect_ok(mpirun(
      {"--mca", "pml", "ob1", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "mgmt0"}));
}

TEST_F(NsMpi, MpiCheck_UcxRcVerbs_AcrossHosts) {
  Child info = spawn(fab_->host_netns(0),
                     {"MRC_CONFIG=" + fab_->host_config(0), "MRC_STATS=0",
                      std::string("LD_PRELOAD=") + MRC_VERBS_SHIM},
                     {"ucx_info", "-d"});
  info.wait(60s);
  if (!ucx_transport_opens(info.out, "ud_verbs", "mrc0:1"))
    GTEST_SKIP() << "UCX's ud_verbs does not open on mrc0 (mrc0 has no UD QPs yet), so UCX "
                    "cannot wire rc_verbs up for Open MPI's UCX PML";
  expect_ok(mpirun({"--mca", "pml", "ucx", "--mca", "btl", "self"},
                   {"UCX_TLS=rc_verbs,ud_verbs", "UCX_NET_DEVICES=mrc0:1"}));
}

}  // namespace
}  // namespace mrc::verbs

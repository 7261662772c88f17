// libnccl-net-mrc as NCCL finds it: every ncclNetPlugin_vN exported with its layout (the
// properties are read at the byte offsets NCCL uses, not through our own structs), init
// errors that name the knob, host memory only, and unloading and loading again.
// Each test runs in a child process (the plugin's state and threads stay out of gtest's).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "plugin_harness.h"

namespace mrc::nccl::harness {
namespace {

// A host config for loopback: two planes on ::1, ephemeral ports.
std::map<std::string, std::string> loopback_env() {
  const std::string cfg = "/tmp/mrc-nccl-abi-" + std::to_string(::getpid()) + ".json";
  std::ofstream(cfg) << "{}\n";
  return {{"MRC_CONFIG", cfg}, {"MRC_PLANES", "::1,::1"}, {"MRC_PORT", "0"}, {"MRC_NIC_GBPS", "8"}};
}

template <class T>
T at(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

struct Layout {
  int version;
  size_t size, speed, max_recvs, dev_type;  // offsets; dev_type 0 = none
  size_t vprops, p2p, rail;                 // 0 = none
};
// Offsets of NCCL 2.30's net_v6.h .. net_v12.h properties structs (docs/nccl-plugin.md, "ABI").
constexpr Layout kLayouts[] = {{6, 48, 28, 44, 0, 0, 0, 0},        {7, 56, 28, 44, 48, 0, 0, 0},
                               {8, 64, 32, 48, 52, 0, 0, 0},       {9, 104, 36, 52, 56, 64, 88, 0},
                               {10, 104, 36, 52, 56, 64, 88, 0},   {11, 112, 36, 52, 56, 64, 88, 0},
                               {12, 128, 36, 52, 56, 64, 104, 124}};

std::string check_version(Plugin& pl, const Layout& l) {
  void* s = pl.sym(l.version);
  if (!s) return "ncclNetPlugin_v" + std::to_string(l.version) + " not exported";
  auto** table = static_cast<void**>(s);
  const char* name = static_cast<const char*>(table[0]);
  if (std::string(name) != "MRC") return "name is " + std::string(name);
  // Every function but makeVDevice (v9+: NULL on purpose) is set.
  const size_t fns[] = {0, 0, 0, 0, 0, 0, 16, 18, 18, 19, 19, 21, 21};
  const size_t n = fns[l.version];
  for (size_t i = 1; i <= n; ++i) {
    const bool make_vdevice = l.version >= 9 && i == 19;
    if (!table[i] && !make_vdevice)
      return "v" + std::to_string(l.version) + ": function " + std::to_string(i) + " is NULL";
  }
  Api a = pl.api(l.version);
  if (int r = a.init()) return "init returned " + std::to_string(r);
  int ndev = 0;
  a.devices(&ndev);
  if (ndev != 1) return "devices: " + std::to_string(ndev);
  uint8_t buf[256];
  std::memset(buf, 0xab, sizeof buf);
  using GetProps = int (*)(int, void*);
  if (int r = reinterpret_cast<GetProps>(table[3])(0, buf))
    return "getProperties returned " + std::to_string(r);
  const std::string v = "v" + std::to_string(l.version) + ": ";
  if (std::string(at<const char*>(buf, 0)) != "mrc0") return v + "name";
  if (at<void*>(buf, 8) != nullptr) return v + "pciPath should be NULL (virtual NIC)";
  if (at<int>(buf, 24) != MRC_NCCL_PTR_HOST)
    return v + "ptrSupport " + std::to_string(at<int>(buf, 24));
  if (at<int>(buf, l.speed) != 8000)
    return v + "speed " + std::to_string(at<int>(buf, l.speed)) + " Mbps, want 8000";
  if (at<int>(buf, l.max_recvs) != 8) return v + "maxRecvs";
  if (at<int>(buf, l.max_recvs - 4) != 65536) return v + "maxComms";
  if (l.dev_type && at<int>(buf, l.dev_type) != mrcNcclNetDeviceHost) return v + "netDeviceType";
  if (l.vprops && (at<int>(buf, l.vprops) != 1 || at<int>(buf, l.vprops + 4) != 0))
    return v + "vProps";
  if (l.p2p && at<size_t>(buf, l.p2p) != (1ull << 30)) return v + "maxP2pBytes";
  if (l.rail && (at<int16_t>(buf, l.rail) != -1 || at<int16_t>(buf, l.rail + 2) != -1))
    return v + "railId/planeId";
  for (size_t i = l.size; i < sizeof buf; ++i)
    if (buf[i] != 0xab) return v + "getProperties wrote past " + std::to_string(l.size) + " bytes";
  void* comm = nullptr;
  uint8_t mem[64];
  void* mh = nullptr;
  // regMr takes a comm; a listen comm is not one, so make a loopback connection first.
  Handle h{};
  void* listen = nullptr;
  if (int r = a.listen(0, h.data(), &listen)) return v + "listen returned " + std::to_string(r);
  void* send = nullptr;
  void* recv = nullptr;
  const double end = now_s() + 10;
  while ((!send || !recv) && now_s() < end) {
    if (!send && a.connect(0, h.data(), &send)) return v + "connect failed";
    if (!recv && a.accept(listen, &recv)) return v + "accept failed";
  }
  if (!send || !recv) return v + "loopback connection not ready";
  comm = send;
  if (a.reg_mr(comm, mem, sizeof mem, MRC_NCCL_PTR_CUDA, &mh) != mrcNcclInvalidArgument)
    return v + "regMr of CUDA memory should be InvalidArgument";
  if (warnings().empty() || warnings().back().find("host memory only") == std::string::npos)
    return v + "no WARN naming host memory";
  if (a.reg_mr(comm, mem, sizeof mem, MRC_NCCL_PTR_HOST, &mh) || !mh) return v + "regMr HOST";
  if (a.dereg_mr(comm, mh)) return v + "deregMr";
  if (a.close_send(send) || a.close_recv(recv) || a.close_listen(listen)) return v + "close";
  if (a.finalize()) return v + "finalize";
  return "";
}

TEST(NcclAbi, EveryVersionExportedWithItsLayout) {
  for (const Layout& l : kLayouts) {
    const std::string err = run_ranks({{loopback_env()}}, [&](int) {
      Plugin pl;
      if (!pl.lib) return "dlopen: " + pl.error;
      return check_version(pl, l);
    });
    EXPECT_EQ(err, "") << "ABI v" << l.version;
  }
}

TEST(NcclAbi, OnlyThePluginTablesAreExported) {
  const std::string err = run_ranks({{loopback_env()}}, [&](int) -> std::string {
    Plugin pl;
    if (!pl.lib) return "dlopen: " + pl.error;
    for (const char* s :
         {"init", "_ZN3mrc4nccl4initEPFv15mrcNcclLogLevelmPKciS4_zE", "ncclNet_v12"})
      if (::dlsym(pl.lib, s)) return std::string("exports ") + s;
    if (pl.sym(5) || pl.sym(13)) return "exports a version that does not exist";
    return "";
  });
  EXPECT_EQ(err, "");
}

TEST(NcclAbi, BadKnobFailsInitWithItsName_ThenInitWorks) {
  auto env = loopback_env();
  env["NCCL_MRC_TIMEOUT"] = "99";
  const std::string err = run_ranks({{env}}, [&](int) -> std::string {
    Plugin pl;
    Api a = pl.api(12);
    if (a.init() != mrcNcclInvalidArgument) return "init with NCCL_MRC_TIMEOUT=99 did not fail";
    if (warnings().empty() ||
        warnings().back().find("NCCL_MRC_TIMEOUT: must be an integer in 1..24") ==
            std::string::npos)
      return "WARN does not name the knob: " + (warnings().empty() ? "" : warnings().back());
    ::unsetenv("NCCL_MRC_TIMEOUT");
    if (a.init() != 0) return "init after fixing the knob failed";
    int n = 0;
    a.devices(&n);
    return n == 1 ? "" : "devices: " + std::to_string(n);
  });
  EXPECT_EQ(err, "");
}

TEST(NcclAbi, NoAddressToAdvertise_IsAnInitErrorNotACrash) {
  auto env = loopback_env();
  env["MRC_PLANES"] = "::";
  const std::string err = run_ranks({{env}}, [&](int) -> std::string {
    Plugin pl;
    Api a = pl.api(9);
    if (a.init() != mrcNcclSystemError) return "init with planes [::] did not fail";
    if (warnings().back().find("bound to [::]") == std::string::npos)
      return "WARN: " + warnings().back();
    return "";
  });
  EXPECT_EQ(err, "");
}

// NCCL may dlclose the plugin when the last communicator goes and load it again later.
TEST(NcclAbi, UnloadAndLoadAgain) {
  const std::string err = run_ranks({{loopback_env()}}, [&](int) -> std::string {
    for (int round = 0; round < 3; ++round) {
      void* lib = ::dlopen(MRC_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
      if (!lib) return ::dlerror();
      auto* t = static_cast<mrcNcclNet_v11*>(::dlsym(lib, "ncclNetPlugin_v11"));
      void* ctx1 = nullptr;
      void* ctx2 = nullptr;
      if (t->init(&ctx1, 1, nullptr, logger, nullptr) ||
          t->init(&ctx2, 2, nullptr, logger, nullptr))
        return "init round " + std::to_string(round);
      Handle h{};
      void* l = nullptr;
      if (t->listen(ctx1, 0, h.data(), &l)) return "listen round " + std::to_string(round);
      t->closeListen(l);
      t->finalize(ctx1);
      t->finalize(ctx2);
      if (::dlclose(lib) != 0) return "dlclose";
      // Really unloaded: the tables are gone from the process.
      if (::dlopen(MRC_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD))
        return "still loaded after dlclose";
    }
    return "";
  });
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace mrc::nccl::harness

// Loading, attaching, reading and detaching the trim eBPF program (trim.h).
#include "trim.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

#include "mrc/common/fd.h"
#include "mrc/common/netns.h"
#include "tc_bpf.h"
#include "trim.skel.h"
#include "trim_shared.h"

namespace mrc::nsfabric {
namespace {

using tc_bpf::fail;
using tc_bpf::in_port_netns;
using tc_bpf::log_tail;
using tc_bpf::quiet_libbpf;

// Where the filter sits on clsact egress; trim_counters and detach_trim find it by these.
constexpr uint32_t kTcHandle = 0x4d52;  // "MR"
constexpr uint32_t kTcPriority = 2;     // after the gray program (gray.cc) on the same port
constexpr const char* kProgName = "mrc_trim";
constexpr const char* kCountersMap = "trim_counters";
constexpr const char* kNotAttached = "no trim program attached";
constexpr tc_bpf::EgressFilter kFilter = {kTcHandle, kTcPriority, kProgName, kCountersMap,
                                          kNotAttached};

struct Skeleton {
  void operator()(trim_bpf* s) const { trim_bpf__destroy(s); }
};

Status<std::string> check_config(const TrimConfig& cfg) {
  if (!std::isfinite(cfg.rate_gbps) || cfg.rate_gbps < 1e-6 || cfg.rate_gbps > 1e4)
    return Err{"bad trim config: rate_gbps must be in [1e-6, 1e4], got " +
               std::to_string(cfg.rate_gbps)};
  if (cfg.ecn_bytes > cfg.trim_bytes)
    return Err{"bad trim config: ecn_bytes (" + std::to_string(cfg.ecn_bytes) +
               ") must not exceed trim_bytes (" + std::to_string(cfg.trim_bytes) + ")"};
  if (cfg.udp_port == 0) return Err{std::string("bad trim config: udp_port must not be 0")};
  return {};
}

Status<std::string> load_and_attach(int ifindex, const TrimConfig& cfg) {
  quiet_libbpf();
  std::vector<char> log(64 * 1024);
  bpf_object_open_opts open_opts{};
  open_opts.sz = sizeof open_opts;
  open_opts.kernel_log_buf = log.data();
  open_opts.kernel_log_size = log.size();
  std::unique_ptr<trim_bpf, Skeleton> skel(trim_bpf__open_opts(&open_opts));
  if (!skel) return fail("bpf open", errno);
  // bytes per ns << 24 = Gbit/s / 8 << 24 = Gbit/s << 21
  const uint64_t rate_q24 = static_cast<uint64_t>(std::llround(std::ldexp(cfg.rate_gbps, 21)));
  skel->rodata->rate_q24 = rate_q24;
  skel->rodata->max_dt_ns = std::numeric_limits<uint64_t>::max() / rate_q24;
  skel->rodata->trim_bytes = cfg.trim_bytes;
  skel->rodata->ecn_bytes = cfg.ecn_bytes;
  skel->rodata->udp_port = cfg.udp_port;
  if (const int err = trim_bpf__load(skel.get()); err != 0) {
    const std::string tail = log_tail(log.data());
    return Err{fail("bpf load", err).error + (tail.empty() ? "" : "\n" + tail)};
  }

  return tc_bpf::attach_egress(ifindex, kFilter, bpf_program__fd(skel->progs.mrc_trim));
}

Result<TrimCounters, std::string> read_counters(int ifindex) {
  mrc_trim_counters c{};
  auto st = tc_bpf::read_egress_map(
      ifindex, {kTcHandle, kTcPriority, kProgName, kCountersMap, kNotAttached}, &c, sizeof c);
  if (!st) return Err{st.error()};
  return TrimCounters{c.packets, c.bytes, c.trimmed, c.ce_marked, c.gso_passed, c.not_mrc};
}

}  // namespace

Status<std::string> attach_trim(const std::string& netns, const std::string& ifname,
                                const TrimConfig& cfg) {
  if (auto st = check_config(cfg); !st) return Err{ifname + " in " + netns + ": " + st.error()};
  return in_port_netns(netns, ifname, [&](int ifindex) { return load_and_attach(ifindex, cfg); });
}

Status<std::string> detach_trim(const std::string& netns, const std::string& ifname) {
  return in_port_netns(netns, ifname,
                       [](int ifindex) { return tc_bpf::detach_egress(ifindex, kFilter); });
}

Result<TrimCounters, std::string> trim_counters(const std::string& netns,
                                                const std::string& ifname) {
  TrimCounters out;
  auto st = in_port_netns(netns, ifname, [&](int ifindex) -> Status<std::string> {
    auto c = read_counters(ifindex);
    if (!c) return Err{c.error()};
    out = *c;
    return {};
  });
  if (!st) return Err{st.error()};
  return out;
}

}  // namespace mrc::nsfabric

// Loading, attaching, reading and detaching the gray-failure eBPF program (gray.h).
#include "gray.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "gray.skel.h"
#include "gray_shared.h"
#include "tc_bpf.h"

namespace mrc::nsfabric {
namespace {

// Where the filter sits on clsact egress: before the trimming program (priority 2, trim.cc).
constexpr uint32_t kTcHandle = 0x4d47;  // "MG"
constexpr uint32_t kTcPriority = 1;
constexpr tc_bpf::EgressFilter kFilter = {kTcHandle, kTcPriority, "mrc_gray", "gray_counters",
                                          "no gray program attached"};

struct Skeleton {
  void operator()(gray_bpf* s) const { gray_bpf__destroy(s); }
};

Status<std::string> check_config(const GrayConfig& cfg) {
  if (cfg.hold_per10k > 10000 || cfg.corrupt_per10k > 10000)
    return Err{std::string("bad gray config: shares are 0..10000 (1/10000)")};
  if (cfg.hold_per10k > 0 && cfg.line_ifindex == 0)
    return Err{std::string("bad gray config: packets held but no delay line interface")};
  return {};
}

Status<std::string> load_and_attach(int ifindex, const GrayConfig& cfg) {
  tc_bpf::quiet_libbpf();
  std::vector<char> log(64 * 1024);
  bpf_object_open_opts open_opts{};
  open_opts.sz = sizeof open_opts;
  open_opts.kernel_log_buf = log.data();
  open_opts.kernel_log_size = log.size();
  std::unique_ptr<gray_bpf, Skeleton> skel(gray_bpf__open_opts(&open_opts));
  if (!skel) return tc_bpf::fail("bpf open", errno);
  skel->rodata->hold_per10k = cfg.hold_per10k;
  skel->rodata->line_ifindex = cfg.line_ifindex;
  skel->rodata->corrupt_per10k = cfg.corrupt_per10k;
  skel->rodata->pass_mark = kGrayPassMark;
  if (const int err = gray_bpf__load(skel.get()); err != 0) {
    const std::string tail = tc_bpf::log_tail(log.data());
    return Err{tc_bpf::fail("bpf load", err).error + (tail.empty() ? "" : "\n" + tail)};
  }
  return tc_bpf::attach_egress(ifindex, kFilter, bpf_program__fd(skel->progs.mrc_gray));
}

}  // namespace

Status<std::string> attach_gray(const std::string& netns, const std::string& ifname,
                                const GrayConfig& cfg) {
  if (auto st = check_config(cfg); !st) return Err{ifname + " in " + netns + ": " + st.error()};
  return tc_bpf::in_port_netns(netns, ifname,
                               [&](int ifindex) { return load_and_attach(ifindex, cfg); });
}

Status<std::string> detach_gray(const std::string& netns, const std::string& ifname) {
  return tc_bpf::in_port_netns(netns, ifname,
                               [](int ifindex) { return tc_bpf::detach_egress(ifindex, kFilter); });
}

Result<GrayCounters, std::string> gray_counters(const std::string& netns,
                                                const std::string& ifname) {
  mrc_gray_counters c{};
  auto st = tc_bpf::in_port_netns(netns, ifname, [&](int ifindex) {
    return tc_bpf::read_egress_map(ifindex, kFilter, &c, sizeof c);
  });
  if (!st) return Err{st.error()};
  return GrayCounters{c.packets, c.held, c.returned, c.corrupted, c.dropped};
}

}  // namespace mrc::nsfabric

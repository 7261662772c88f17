// Loading, attaching, reading and detaching the trim eBPF program (trim.h).
#include "trim.h"

#include "common/fd.h"
#include "io/netns.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdarg>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

#include "trim.skel.h"
#include "trim_shared.h"

namespace mrc::nsfabric {
namespace {

// Where the filter sits on clsact egress; trim_counters and detach_trim find it by these.
constexpr uint32_t kTcHandle = 0x4d52;  // "MR"
constexpr uint32_t kTcPriority = 1;
constexpr const char* kProgName = "mrc_trim";
constexpr const char* kCountersMap = "trim_counters";
constexpr const char* kNotAttached = "no trim program attached";

std::string errno_text(int e) {
  std::string s = std::error_code(e, std::generic_category()).message();
  if (e == EPERM || e == EACCES) s += " (needs root)";
  return s;
}

// "<what>: <cause>" for an errno value or a negative libbpf return.
Err<std::string> fail(const std::string& what, int err) {
  return Err{what + ": " + errno_text(err < 0 ? -err : err)};
}

// Runs `fn` in the port's netns; every error comes back as "<ifname> in <netns>: <error>".
Status<std::string> in_port_netns(const std::string& netns, const std::string& ifname,
                                  const std::function<Status<std::string>(int ifindex)>& fn) {
  auto st = io::in_netns(netns, [&]() -> Status<std::string> {
    const unsigned idx = if_nametoindex(ifname.c_str());
    if (idx == 0) return fail("interface", errno);
    return fn(static_cast<int>(idx));
  });
  if (!st) return Err{ifname + " in " + netns + ": " + st.error()};
  return {};
}

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

// The last lines of a verifier log: enough to see why a load failed.
std::string log_tail(const char* log) {
  std::string s(log);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  size_t pos = s.size();
  for (int lines = 0; lines < 8 && pos != std::string::npos && pos > 0; ++lines)
    pos = s.rfind('\n', pos - 1);
  return pos == std::string::npos ? s : s.substr(pos + 1);
}

bpf_tc_hook egress_hook(int ifindex) {
  bpf_tc_hook hook{};
  hook.sz = sizeof hook;
  hook.ifindex = ifindex;
  hook.attach_point = BPF_TC_EGRESS;
  return hook;
}

bpf_tc_opts filter_opts() {
  bpf_tc_opts opts{};
  opts.sz = sizeof opts;
  opts.handle = kTcHandle;
  opts.priority = kTcPriority;
  return opts;
}

// libbpf's messages to stderr as by default (no debug lines), without the kernel's "Exclusivity
// flag on" that comes with EEXIST for a clsact qdisc that is already there (fine here).
int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list ap) {
  if (level == LIBBPF_DEBUG) return 0;
  char line[1024];
  std::vsnprintf(line, sizeof line, fmt, ap);
  if (std::strstr(line, "Exclusivity flag on") != nullptr) return 0;
  return std::fputs(line, stderr);
}

Status<std::string> load_and_attach(int ifindex, const TrimConfig& cfg) {
  libbpf_set_print(libbpf_print);
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

  bpf_tc_hook hook = egress_hook(ifindex);
  if (const int err = bpf_tc_hook_create(&hook); err != 0 && err != -EEXIST)
    return fail("tc clsact qdisc", err);
  bpf_tc_opts opts = filter_opts();
  opts.prog_fd = bpf_program__fd(skel->progs.mrc_trim);
  opts.flags = BPF_TC_F_REPLACE;
  if (const int err = bpf_tc_attach(&hook, &opts); err != 0) return fail("tc attach", err);
  return {};  // closing our fds leaves the program to the filter
}

Result<TrimCounters, std::string> read_counters(int ifindex) {
  bpf_tc_hook hook = egress_hook(ifindex);
  bpf_tc_opts opts = filter_opts();
  if (const int err = bpf_tc_query(&hook, &opts); err != 0) {
    if (err == -ENOENT || err == -EINVAL) return Err{std::string(kNotAttached)};
    return fail("tc query", err);
  }
  UniqueFd prog(bpf_prog_get_fd_by_id(opts.prog_id));
  if (prog.get() < 0) return fail("bpf prog by id", errno);
  std::vector<uint32_t> map_ids(8);
  bpf_prog_info info{};
  info.nr_map_ids = static_cast<uint32_t>(map_ids.size());
  info.map_ids = reinterpret_cast<uintptr_t>(map_ids.data());
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(prog.get(), &info, &len) != 0) return fail("bpf prog info", errno);
  if (std::strcmp(info.name, kProgName) != 0)
    return Err{std::string("the egress filter runs '") + info.name + "', not " + kProgName};
  map_ids.resize(std::min<size_t>(info.nr_map_ids, map_ids.size()));
  for (const uint32_t id : map_ids) {
    UniqueFd map(bpf_map_get_fd_by_id(id));
    if (map.get() < 0) return fail("bpf map by id", errno);
    bpf_map_info minfo{};
    uint32_t mlen = sizeof minfo;
    if (bpf_obj_get_info_by_fd(map.get(), &minfo, &mlen) != 0) return fail("bpf map info", errno);
    if (std::strcmp(minfo.name, kCountersMap) != 0) continue;
    const uint32_t key = 0;
    mrc_trim_counters c{};
    if (bpf_map_lookup_elem(map.get(), &key, &c) != 0) return fail("read counters", errno);
    return TrimCounters{c.packets, c.bytes, c.trimmed, c.ce_marked, c.gso_passed, c.not_mrc};
  }
  return Err{std::string("program ") + kProgName + " has no map " + kCountersMap};
}

}  // namespace

Status<std::string> attach_trim(const std::string& netns, const std::string& ifname,
                                const TrimConfig& cfg) {
  if (auto st = check_config(cfg); !st) return Err{ifname + " in " + netns + ": " + st.error()};
  return in_port_netns(netns, ifname, [&](int ifindex) { return load_and_attach(ifindex, cfg); });
}

Status<std::string> detach_trim(const std::string& netns, const std::string& ifname) {
  return in_port_netns(netns, ifname, [](int ifindex) -> Status<std::string> {
    bpf_tc_hook hook = egress_hook(ifindex);
    bpf_tc_opts opts = filter_opts();
    const int err = bpf_tc_detach(&hook, &opts);
    if (err == -ENOENT || err == -EINVAL) return Err{std::string(kNotAttached)};
    if (err != 0) return fail("tc detach", err);
    return {};
  });
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

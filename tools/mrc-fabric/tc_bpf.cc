// Shared pieces of the tc eBPF loaders (tc_bpf.h).
#include "tc_bpf.h"

#include <bpf/bpf.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <vector>

#include "mrc/common/fd.h"
#include "mrc/common/netns.h"

namespace mrc::nsfabric::tc_bpf {
namespace {

std::string errno_text(int e) {
  std::string s = std::error_code(e, std::generic_category()).message();
  if (e == EPERM || e == EACCES) s += " (needs root)";
  return s;
}

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list ap) {
  if (level == LIBBPF_DEBUG) return 0;
  char line[1024];
  std::vsnprintf(line, sizeof line, fmt, ap);
  if (std::strstr(line, "Exclusivity flag on") != nullptr) return 0;
  return std::fputs(line, stderr);
}

}  // namespace

Err<std::string> fail(const std::string& what, int err) {
  return Err{what + ": " + errno_text(err < 0 ? -err : err)};
}

Status<std::string> in_port_netns(const std::string& netns, const std::string& ifname,
                                  const std::function<Status<std::string>(int ifindex)>& fn) {
  auto st = mrc::in_netns(netns, [&]() -> Status<std::string> {
    const unsigned idx = if_nametoindex(ifname.c_str());
    if (idx == 0) return fail("interface", errno);
    return fn(static_cast<int>(idx));
  });
  if (!st) return Err{ifname + " in " + netns + ": " + st.error()};
  return {};
}

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

namespace {

bpf_tc_opts filter_opts(const EgressFilter& f) {
  bpf_tc_opts opts{};
  opts.sz = sizeof opts;
  opts.handle = f.handle;
  opts.priority = f.priority;
  return opts;
}

}  // namespace

Status<std::string> attach_egress(int ifindex, const EgressFilter& f, int prog_fd) {
  bpf_tc_hook hook = egress_hook(ifindex);
  if (const int err = bpf_tc_hook_create(&hook); err != 0 && err != -EEXIST)
    return fail("tc clsact qdisc", err);
  bpf_tc_opts opts = filter_opts(f);
  opts.prog_fd = prog_fd;
  opts.flags = BPF_TC_F_REPLACE;
  if (const int err = bpf_tc_attach(&hook, &opts); err != 0) return fail("tc attach", err);
  return {};  // closing the caller's fds leaves the program to the filter
}

Status<std::string> detach_egress(int ifindex, const EgressFilter& f) {
  bpf_tc_hook hook = egress_hook(ifindex);
  bpf_tc_opts opts = filter_opts(f);
  const int err = bpf_tc_detach(&hook, &opts);
  if (err == -ENOENT || err == -EINVAL) return Err{std::string(f.not_attached)};
  if (err != 0) return fail("tc detach", err);
  return {};
}

Status<std::string> read_egress_map(int ifindex, const EgressFilter& f, void* out, size_t size) {
  bpf_tc_hook hook = egress_hook(ifindex);
  bpf_tc_opts opts = filter_opts(f);
  if (const int err = bpf_tc_query(&hook, &opts); err != 0) {
    if (err == -ENOENT || err == -EINVAL) return Err{std::string(f.not_attached)};
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
  if (std::strcmp(info.name, f.prog_name) != 0)
    return Err{std::string("the egress filter runs '") + info.name + "', not " + f.prog_name};
  map_ids.resize(std::min<size_t>(info.nr_map_ids, map_ids.size()));
  for (const uint32_t id : map_ids) {
    UniqueFd map(bpf_map_get_fd_by_id(id));
    if (map.get() < 0) return fail("bpf map by id", errno);
    bpf_map_info minfo{};
    uint32_t mlen = sizeof minfo;
    if (bpf_obj_get_info_by_fd(map.get(), &minfo, &mlen) != 0) return fail("bpf map info", errno);
    if (std::strcmp(minfo.name, f.map_name) != 0) continue;
    if (minfo.value_size != size) return Err{std::string("map ") + f.map_name + ": wrong size"};
    const uint32_t key = 0;
    if (bpf_map_lookup_elem(map.get(), &key, out) != 0) return fail("read counters", errno);
    return {};
  }
  return Err{std::string("program ") + f.prog_name + " has no map " + f.map_name};
}

void quiet_libbpf() { libbpf_set_print(libbpf_print); }

}  // namespace mrc::nsfabric::tc_bpf

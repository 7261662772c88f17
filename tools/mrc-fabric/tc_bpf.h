// What the loaders of the fabric's tc eBPF programs (trim.cc, gray.cc) share: running in a
// port's namespace, errors, the verifier log, the clsact egress hook. Threading: free
// functions, any thread (in_port_netns runs its function on a short-lived thread of its own).
#pragma once

#include <bpf/libbpf.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "mrc/common/result.h"

namespace mrc::nsfabric::tc_bpf {

// "<what>: <cause>" for an errno value or a negative libbpf return; "(needs root)" added for
// EPERM and EACCES.
Err<std::string> fail(const std::string& what, int err);

// Runs `fn` with the interface's index inside netns /run/netns/<netns>; every error comes back
// as "<ifname> in <netns>: <error>".
Status<std::string> in_port_netns(const std::string& netns, const std::string& ifname,
                                  const std::function<Status<std::string>(int ifindex)>& fn);

// The last lines of a verifier log: enough to see why a load failed.
std::string log_tail(const char* log);

// The clsact egress hook of an interface.
bpf_tc_hook egress_hook(int ifindex);

// Where a program sits on clsact egress and what its one-entry counters map is called.
struct EgressFilter {
  uint32_t handle = 0;
  uint32_t priority = 0;
  const char* prog_name = "";
  const char* map_name = "";
  const char* not_attached = "";  // the error when no filter sits there
};

// Attaches program prog_fd as filter f (handle, priority) on the interface's clsact egress,
// creating the qdisc if needed and replacing a filter already there.
Status<std::string> attach_egress(int ifindex, const EgressFilter& f, int prog_fd);
// Removes filter f; Err(f.not_attached) when there is none.
Status<std::string> detach_egress(int ifindex, const EgressFilter& f);

// Reads entry 0 of the map `f.map_name` of the program attached as `f` (checked to be
// f.prog_name) into out[0..size).
Status<std::string> read_egress_map(int ifindex, const EgressFilter& f, void* out, size_t size);

// Installs libbpf's message printer: warnings to stderr, no debug lines, no "Exclusivity flag
// on" (EEXIST for a clsact qdisc that is already there is fine here).
void quiet_libbpf();

}  // namespace mrc::nsfabric::tc_bpf

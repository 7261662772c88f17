// Run a function inside a named network namespace. Threading: each call uses its own
// short-lived thread (setns changes only the calling thread), so callers on any thread
// are unaffected; fn runs on that thread and may not keep thread-local state.
//
// Sockets keep the namespace they were created in, so a process can make sockets in
// several namespaces this way and use them from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "mrc/common/result.h"

namespace mrc {

/// The path of a named namespace as `ip netns` makes them: /run/netns/<name>.
std::string netns_path(const std::string& name);

/// Whether this process may make network namespaces (root / CAP_SYS_ADMIN): tries on a
/// throwaway thread. The error says why not, for skipping tests and for the demo's fallback.
Status<std::string> netns_supported();

/// Enters namespace `name` on the calling thread. Errors name the namespace and the cause
/// ("netns mrcf-h0 does not exist", "netns x: setns: Operation not permitted").
Status<std::string> enter_netns(const std::string& name);

/// Whether a TCP socket listens on `port` (IPv4 or IPv6) in the network namespace whose
/// /proc net directory is `proc_net`: "/proc/thread-self/net" for the calling thread's,
/// "/proc/<pid>/net" for a process's.
bool tcp_listening(const std::string& proc_net, uint16_t port);

/// Runs fn() inside namespace `name` on a new thread and returns its result; an empty
/// name runs it on the new thread in the current namespace. fn returns a Result<T,
/// std::string> or a Status<std::string>; a failure to enter comes back as its error.
template <class F>
auto in_netns(const std::string& name, F&& fn) -> decltype(fn()) {
  using R = decltype(fn());
  std::optional<R> out;
  std::thread t([&] {
    if (!name.empty()) {
      auto s = enter_netns(name);
      if (!s.ok()) {
        out.emplace(Err(s.error()));
        return;
      }
    }
    out.emplace(fn());
  });
  t.join();
  return std::move(*out);
}

}  // namespace mrc

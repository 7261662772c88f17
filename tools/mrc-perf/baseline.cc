// iperf3 baselines (TCP, MPTCP): child processes, their JSON, the MPTCP path manager.
#include "baseline.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "mrc/common/netns.h"

extern char** environ;

namespace mrc::perf {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using Seconds = std::chrono::duration<double>;

constexpr Seconds kListenTimeout{5};   // iperf3 server start until it listens
constexpr Seconds kClientGrace{10};    // client run beyond duration_s (connect retries, teardown)
constexpr Seconds kServerExit{3};      // one-off server exit after its client finished
constexpr Seconds kCommandTimeout{5};  // ip, sysctl, ss
constexpr Seconds kPoll{0.005};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  constexpr size_t kMax = 400;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

std::string gb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GB", bytes / 1e9);
  return b;
}

bool in_path(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && access((dir + "/" + prog).c_str(), X_OK) == 0) return true;
  }
  return false;
}

Status<std::string> need(const std::string& prog, const std::string& package) {
  if (in_path(prog)) return {};
  return Err(prog + " not found: install " + package);
}

// A file under /tmp for a child's output, removed with the object.
class TempFile {
 public:
  TempFile() {
    char name[] = "/tmp/mrc-baseline-XXXXXX";
    const int fd = mkstemp(name);
    if (fd >= 0) {
      close(fd);
      path_ = name;
    }
  }
  ~TempFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  std::string read() const {
    std::ifstream f(path_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

 private:
  std::string path_;
};

// A child process we started. Destruction ends it (SIGTERM, then SIGKILL) and reaps it.
class Child {
 public:
  // stdin is /dev/null; stdout and stderr go to the given files.
  static Result<Child, std::string> spawn(const std::vector<std::string>& argv, const TempFile& out,
                                          const TempFile& err) {
    if (out.path().empty() || err.path().empty())
      return Err(std::string("cannot create a temporary file in /tmp: ") + std::strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out.path().c_str(), O_WRONLY | O_TRUNC, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err.path().c_str(), O_WRONLY | O_TRUNC, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return Err("cannot start `" + join(argv) + "`: " + std::strerror(rc));
    return Child(pid);
  }

  Child(Child&& o) noexcept : pid_(std::exchange(o.pid_, -1)), status_(o.status_) {}
  Child& operator=(Child&&) = delete;
  ~Child() { stop(); }

  // The exit status (as from waitpid) once the child has exited; reaps it.
  std::optional<int> poll() {
    if (pid_ > 0 && !status_) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
    }
    return status_;
  }

  std::optional<int> wait_for(Seconds limit) {
    const auto end = Clock::now() + limit;
    while (!poll() && Clock::now() < end) std::this_thread::sleep_for(kPoll);
    return status_;
  }

  void stop() {
    if (pid_ <= 0 || poll()) return;
    kill(pid_, SIGTERM);
    if (!wait_for(Seconds(1))) {
      kill(pid_, SIGKILL);
      int st = 0;
      waitpid(pid_, &st, 0);
      status_ = st;
    }
  }

 private:
  explicit Child(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<int> status_;
};

std::string describe_exit(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by signal ") + strsignal(WTERMSIG(st));
  return "status " + std::to_string(st);
}

// Runs a short command to completion; its stdout, or an error with its stderr.
Result<std::string, std::string> run_cmd(const std::vector<std::string>& argv) {
  TempFile out, err;
  auto child = Child::spawn(argv, out, err);
  if (!child) return Err(child.error());
  const auto st = child->wait_for(kCommandTimeout);
  if (!st) return Err("`" + join(argv) + "` did not finish within 5 s");
  if (!WIFEXITED(*st) || WEXITSTATUS(*st) != 0)
    return Err("`" + join(argv) + "` failed (" + describe_exit(*st) + "): " + trim(err.read()));
  return out.read();
}

Result<json, std::string> run_json(const std::vector<std::string>& argv) {
  auto out = run_cmd(argv);
  if (!out) return Err(out.error());
  json j = json::parse(*out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Err("`" + join(argv) + "` printed no JSON: " + trim(*out));
  return j;
}

bool same_addr(const std::string& a, const std::string& b) {
  in6_addr x{}, y{};
  return inet_pton(AF_INET6, a.c_str(), &x) == 1 && inet_pton(AF_INET6, b.c_str(), &y) == 1 &&
         std::memcmp(&x, &y, sizeof x) == 0;
}

// The interface of `netns` that holds `addr`.
Result<std::string, std::string> iface_of(const std::string& netns, const std::string& addr) {
  auto j = run_json({"ip", "-j", "-n", netns, "addr", "show"});
  if (!j) return Err(j.error());
  try {
    for (const auto& link : *j) {
      for (const auto& a : link.value("addr_info", json::array())) {
        if (same_addr(a.value("local", ""), addr)) return link.value("ifname", std::string());
      }
    }
  } catch (const json::exception& e) {
    return Err(std::string("unexpected `ip -j addr show` output: ") + e.what());
  }
  return Err("address " + addr + " is not on any interface of netns " + netns);
}

// Bytes sent so far by each interface of `netns`.
Result<std::map<std::string, double>, std::string> tx_bytes(const std::string& netns) {
  auto j = run_json({"ip", "-j", "-s", "-n", netns, "link", "show"});
  if (!j) return Err(j.error());
  std::map<std::string, double> m;
  try {
    for (const auto& link : *j) {
      const json tx = link.value("stats64", json::object()).value("tx", json::object());
      m[link.value("ifname", std::string())] = tx.value("bytes", 0.0);
    }
  } catch (const json::exception& e) {
    return Err(std::string("unexpected `ip -j -s link show` output: ") + e.what());
  }
  return m;
}

Status<std::string> wait_listening(const BaselineSpec& spec, Child& server, const TempFile& log) {
  const auto end = Clock::now() + kListenTimeout;
  while (Clock::now() < end) {
    bool up = false;
    auto s = mrc::in_netns(spec.server_netns, [&]() -> Status<std::string> {
      up = mrc::tcp_listening("/proc/thread-self/net", spec.port);
      return {};
    });
    if (!s) return s;
    if (up) return {};
    if (const auto st = server.poll())
      return Err("iperf3 server exited (" + describe_exit(*st) + "): " + trim(log.read()));
    std::this_thread::sleep_for(Seconds(0.02));
  }
  return Err("iperf3 server in netns " + spec.server_netns + " is not listening on port " +
             std::to_string(spec.port) + " after 5 s");
}

// MPTCP subflows of the client's connections to the server port, from `ss -tni`: each
// subflow line is followed by an info line "... tcp-ulp-mptcp ... token:<sub>/<msk>(id:N)".
// Returns the subflows ("[local]:port->[peer]:port") of the connection that has the most.
Result<std::vector<std::string>, std::string> mptcp_subflows(const BaselineSpec& spec) {
  auto out = run_cmd({"ip", "netns", "exec", spec.client_netns, "ss", "-tniH", "state",
                      "established", "dport", "=", ":" + std::to_string(spec.port)});
  if (!out) return Err(out.error());
  std::map<std::string, std::vector<std::string>> by_conn;
  std::istringstream lines(*out);
  std::string socket;  // "local->peer" of the last socket line
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    if (line[0] != '\t' && line[0] != ' ') {
      // Recv-Q Send-Q Local Peer (no State column under a state filter).
      std::istringstream f(line);
      std::string rq, sq, local, peer;
      f >> rq >> sq >> local >> peer;
      socket = local + "->" + peer;
      continue;
    }
    const size_t ulp = line.find("tcp-ulp-mptcp");
    const size_t tok = line.find("token:", ulp == std::string::npos ? line.size() : ulp);
    if (tok == std::string::npos || socket.empty()) continue;
    std::string token = line.substr(tok);
    token = token.substr(0, token.find(' '));
    const size_t slash = token.find('/');
    const std::string msk = slash == std::string::npos ? token : token.substr(slash + 1);
    by_conn[msk.substr(0, msk.find('('))].push_back(socket);
    socket.clear();
  }
  std::vector<std::string> best;
  for (auto& [msk, subflows] : by_conn) {
    if (subflows.size() > best.size()) best = subflows;
  }
  return best;
}

// Replaces the MPTCP endpoints of both namespaces with one per plane (see run_mptcp).
Status<std::string> setup_mptcp(const BaselineSpec& spec) {
  for (const auto* ns : {&spec.client_netns, &spec.server_netns}) {
    for (const std::vector<std::string>& cmd :
         {std::vector<std::string>{"ip", "netns", "exec", *ns, "sysctl", "-qw",
                                   "net.mptcp.enabled=1"},
          {"ip", "-n", *ns, "mptcp", "limits", "set", "subflow", "8", "add_addr_accepted", "8"},
          {"ip", "-n", *ns, "mptcp", "endpoint", "flush"}}) {
      auto r = run_cmd(cmd);
      if (!r) return Err("mptcp setup: " + r.error());
    }
  }
  const auto add = [](const std::string& ns, const std::string& addr,
                      const char* flag) -> Status<std::string> {
    auto dev = iface_of(ns, addr);
    if (!dev) return Err("mptcp setup: " + dev.error());
    std::vector<std::string> cmd = {"ip", "-n", ns, "mptcp", "endpoint", "add", addr, "dev", *dev};
    std::istringstream words(flag);
    for (std::string w; words >> w;) cmd.push_back(w);
    auto r = run_cmd(cmd);
    if (!r) return Err("mptcp setup: " + r.error());
    return {};
  };
  // The server announces its other plane addresses (ADD_ADDR); the client opens a subflow to
  // each from the source address routing picks. Planes never meet, so the client gets a route
  // to each announced address through that plane, with that plane's address as source (what
  // `ip route get <server addr> from <client addr>` says), removed again by flush_mptcp.
  for (size_t p = 1; p < spec.server_addrs.size() && p < spec.client_addrs.size(); ++p) {
    auto j = run_json({"ip", "-j", "-n", spec.client_netns, "route", "get", spec.server_addrs[p],
                       "from", spec.client_addrs[p]});
    if (!j) return Err("mptcp setup: " + j.error());
    std::vector<std::string> cmd = {"ip", "-n", spec.client_netns, "route", "replace",
                                    spec.server_addrs[p] + "/128"};
    try {
      const json& r = j->at(0);
      if (r.contains("gateway")) cmd.insert(cmd.end(), {"via", r.at("gateway").get<std::string>()});
      cmd.insert(cmd.end(), {"dev", r.at("dev").get<std::string>(), "src", spec.client_addrs[p]});
    } catch (const json::exception& e) {
      return Err(std::string("mptcp setup: unexpected `ip -j route get` output: ") + e.what());
    }
    if (auto r = run_cmd(cmd); !r) return Err("mptcp setup: " + r.error());
  }
  for (const auto& a : spec.server_addrs) {
    if (auto s = add(spec.server_netns, a, "signal"); !s) return s;
  }
  return {};
}

void flush_mptcp(const BaselineSpec& spec) {
  for (const auto* ns : {&spec.client_netns, &spec.server_netns}) {
    (void)run_cmd({"ip", "-n", *ns, "mptcp", "endpoint", "flush"});
  }
  for (size_t p = 1; p < spec.server_addrs.size() && p < spec.client_addrs.size(); ++p) {
    (void)run_cmd({"ip", "-n", spec.client_netns, "route", "del", spec.server_addrs[p] + "/128"});
  }
}

// One iperf3 run; `mid_run` is called once, halfway through, while the test is running.
Result<BaselineResult, std::string> run_iperf3(const BaselineSpec& spec, bool mptcp,
                                               const std::function<void()>& mid_run) {
  const double whole = std::round(spec.duration_s);
  if (std::fabs(spec.duration_s - whole) > 1e-9)
    return Err("duration_s must be a whole number of seconds for iperf3, got " +
               num(spec.duration_s));
  if (spec.interval_s < 0.1 - 1e-9)
    return Err("interval_s must be >= 0.1 for iperf3, got " + num(spec.interval_s));
  const std::vector<std::string> prefix =
      mptcp ? std::vector<std::string>{"mptcpize", "run", "iperf3"}
            : std::vector<std::string>{"iperf3"};
  const auto command = [&](const std::string& ns, std::vector<std::string> args) {
    std::vector<std::string> argv = {"ip", "netns", "exec", ns};
    argv.insert(argv.end(), prefix.begin(), prefix.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  const std::string port = std::to_string(spec.port);

  TempFile server_log;
  auto server = Child::spawn(
      command(spec.server_netns, {"-s", "-1", "-p", port, "-J", "-i", num(spec.interval_s)}),
      server_log, server_log);
  if (!server) return Err(server.error());
  if (auto s = wait_listening(spec, *server, server_log); !s) return Err(s.error());

  TempFile client_out, client_err;
  auto client = Child::spawn(
      command(spec.client_netns,
              {"-c", spec.server_addrs[0], "-B", spec.client_addrs[0], "-p", port, "-t",
               std::to_string(static_cast<int>(whole)), "-i", num(spec.interval_s), "-P",
               std::to_string(spec.streams), "-J", "--get-server-output"}),
      client_out, client_err);
  if (!client) return Err(client.error());

  const auto start = Clock::now();
  const auto deadline = start + Seconds(spec.duration_s) + kClientGrace;
  bool mid_done = !mid_run;
  std::optional<int> st;
  for (int k = 1; !st; ++k) {
    const double t = k * spec.interval_s;
    const auto tick = start + Seconds(t);
    while (!(st = client->poll()) && Clock::now() < std::min(tick, deadline))
      std::this_thread::sleep_for(kPoll);
    if (st) break;
    if (Clock::now() >= deadline)
      return Err(std::string("iperf3 client did not finish within duration_s + 10 s"));
    if (t <= spec.duration_s + 1e-9 && spec.on_tick) spec.on_tick(t);
    if (!mid_done && t >= spec.duration_s / 2) {
      mid_run();
      mid_done = true;
    }
  }
  // iperf3 -J reports its errors in the JSON and may still exit 0.
  auto r = detail::parse_iperf3(client_out.read());
  const std::string err = trim(client_err.read());
  if (!r) return Err(r.error() + (err.empty() ? "" : " (stderr: " + err + ")"));
  if (!WIFEXITED(*st) || WEXITSTATUS(*st) != 0)
    return Err("iperf3 client failed (" + describe_exit(*st) + "): " + err);
  if (!server->wait_for(kServerExit)) server->stop();
  return r;
}

}  // namespace

namespace detail {

Result<BaselineResult, std::string> parse_iperf3(const std::string& out) {
  const json j = json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Err("iperf3 client printed no JSON: " + trim(out));
  try {
    if (j.contains("error")) return Err("iperf3 client: " + j["error"].get<std::string>());
    // The receiver's own report (server -J, client --get-server-output): MRC is measured where
    // its bytes are accepted, so the baselines are too.
    const json srv = j.value("server_output_json", json::object());
    if (srv.contains("error")) return Err("iperf3 server: " + srv["error"].get<std::string>());
    BaselineResult r;
    const json ivs = srv.value("intervals", json::array());
    for (size_t i = 0; i < ivs.size(); ++i) {
      const json sum = ivs[i].value("sum", json::object());
      if (!sum.contains("start") || !sum.contains("end") || !sum.contains("bytes")) continue;
      const double start = sum["start"].get<double>(), end = sum["end"].get<double>();
      const double bits = sum["bytes"].get<double>() * 8;
      // The receiver's closing interval holds what was still in flight when the sender
      // stopped, over a few ms: folded into the interval before it, so samples keep their
      // period and still tile the run.
      if (i + 1 == ivs.size() && !r.samples.empty() && end - start < 0.5 * r.samples.back().dur_s) {
        Sample& last = r.samples.back();
        const double total = last.gbps * 1e9 * last.dur_s + bits;
        last.dur_s = end - (last.t_s - last.dur_s);
        last.t_s = end;
        last.gbps = last.dur_s > 0 ? total / last.dur_s / 1e9 : 0;
        continue;
      }
      if (end - start < 1e-6) continue;
      r.samples.push_back({end, bits / (end - start) / 1e9, end - start});
    }
    const json recv = srv.value("end", json::object()).value("sum_received", json::object());
    if (r.samples.empty() || !recv.contains("bytes") || !recv.contains("seconds"))
      return Err("iperf3 JSON has no receiver (server) intervals or end.sum_received: " +
                 trim(out).substr(0, 400));
    double secs = 0;
    for (const Sample& x : r.samples) secs = x.t_s;
    r.mean_gbps = secs > 0 ? recv["bytes"].get<double>() * 8 / secs / 1e9 : 0;
    return r;
  } catch (const json::exception& e) {
    return Err(std::string("unexpected iperf3 JSON: ") + e.what());
  }
}

Status<std::string> check_spec(const BaselineSpec& spec) {
  for (const auto* ns : {&spec.client_netns, &spec.server_netns}) {
    if (ns->empty()) return Err(std::string("netns name is empty"));
    struct stat sb;
    if (stat(("/run/netns/" + *ns).c_str(), &sb) != 0)
      return Err("netns " + *ns + " does not exist");
  }
  if (spec.client_addrs.empty()) return Err(std::string("client_addrs is empty"));
  if (spec.server_addrs.empty()) return Err(std::string("server_addrs is empty"));
  for (const auto* v : {&spec.client_addrs, &spec.server_addrs}) {
    for (const auto& a : *v) {
      in6_addr x;
      if (inet_pton(AF_INET6, a.c_str(), &x) != 1) return Err("not an IPv6 address: '" + a + "'");
    }
  }
  if (!(spec.duration_s > 0)) return Err(std::string("duration_s must be > 0"));
  if (!(spec.interval_s > 0) || spec.interval_s > spec.duration_s)
    return Err(std::string("interval_s must be in (0, duration_s]"));
  if (spec.streams < 1 || spec.streams > 64) return Err(std::string("streams must be 1..64"));
  return {};
}

}  // namespace detail

Result<BaselineResult, std::string> run_tcp(const BaselineSpec& spec) {
  if (auto s = detail::check_spec(spec); !s) return Err(s.error());
  if (auto s = need("ip", "iproute2"); !s) return Err(s.error());
  if (auto s = need("iperf3", "iperf3"); !s) return Err(s.error());
  auto r = run_iperf3(spec, /*mptcp=*/false, {});
  if (!r) return r;
  r->detail = "tcp: iperf3 -P " + std::to_string(spec.streams) + " [" + spec.client_addrs[0] +
              "] -> [" + spec.server_addrs[0] + "]:" + std::to_string(spec.port);
  return r;
}

Result<BaselineResult, std::string> run_mptcp(const BaselineSpec& spec) {
  if (auto s = detail::check_spec(spec); !s) return Err(s.error());
  if (auto s = need("ip", "iproute2"); !s) return Err(s.error());
  if (auto s = need("ss", "iproute2"); !s) return Err(s.error());
  if (auto s = need("iperf3", "iperf3"); !s) return Err(s.error());
  if (auto s = need("mptcpize", "mptcpize"); !s) return Err(s.error());

  // Each plane's interface in the client netns, to count what it sent.
  std::vector<std::string> ifaces;
  for (const auto& a : spec.client_addrs) {
    auto dev = iface_of(spec.client_netns, a);
    if (!dev) return Err(dev.error());
    ifaces.push_back(*dev);
  }
  struct Flush {
    const BaselineSpec& spec;
    ~Flush() { flush_mptcp(spec); }
  } flush{spec};
  if (auto s = setup_mptcp(spec); !s) return Err(s.error());
  auto before = tx_bytes(spec.client_netns);
  if (!before) return Err(before.error());

  Result<std::vector<std::string>, std::string> subflows = std::vector<std::string>{};
  auto r = run_iperf3(spec, /*mptcp=*/true, [&] { subflows = mptcp_subflows(spec); });
  if (!r) return Err("mptcp: " + r.error());
  if (!subflows) return Err("mptcp: " + subflows.error());
  if (subflows->empty())
    return Err(
        std::string("mptcpize: the iperf3 connection did not use MPTCP (no MPTCP subflow "
                    "seen by ss); check net.mptcp.enabled and mptcpize"));
  auto after = tx_bytes(spec.client_netns);
  if (!after) return Err(after.error());

  r->subflows = static_cast<int>(subflows->size());
  r->detail = "mptcp: iperf3 -P " + std::to_string(spec.streams) + ", " +
              std::to_string(r->subflows) + " subflows (";
  for (size_t i = 0; i < subflows->size(); ++i) r->detail += (i ? ", " : "") + (*subflows)[i];
  r->detail += "); client tx per plane:";
  for (size_t p = 0; p < ifaces.size(); ++p) {
    r->detail += " p" + std::to_string(p) + " " + gb((*after)[ifaces[p]] - (*before)[ifaces[p]]);
  }
  return r;
}

}  // namespace mrc::perf

// The namespace fabric: build, faults, status, teardown (see nsfabric.h).
#include "nsfabric.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "command.h"
#include "delay_line.h"
#include "gray.h"
#include "mrc/common/fd.h"
#include "srv6/config.h"
#include "srv6/export_linux.h"
#include "srv6/netlink.h"
#include "trim.h"

namespace mrc::nsfabric {
namespace {

namespace fs = std::filesystem;
using srv6::Fabric;
using srv6::SwitchId;
using srv6::Tier;

constexpr char kFlapperName[] = "mrcf-flap";  // process name (comm) of a flapper

// One namespace of the fabric: a host or a switch.
struct Node {
  bool is_host = false;
  uint32_t host = 0;
  SwitchId sw;
};

struct End {
  Node node;
  std::string ifname;
};

struct Cable {
  End a, b;  // a: the switch it was listed from (in cables(): the T0), b: the other end
  bool operator==(const Cable& o) const {  // either way round
    return (a.ifname == o.a.ifname && b.ifname == o.b.ifname) ||
           (a.ifname == o.b.ifname && b.ifname == o.a.ifname);
  }
};

std::string host_ns(const std::string& prefix, uint32_t h) {
  return prefix + "-h" + std::to_string(h);
}

std::string mgmt_ns(const std::string& prefix) { return prefix + "-mgmt"; }

std::string host_config_file(const std::string& prefix, uint32_t h) {
  return state_dir(prefix) + "/hosts/h" + std::to_string(h) + ".json";
}

// The management network's bridges: br0 holds hosts 0..kMgmtHostsPerBridge-1 and the
// uplinks of the others.
uint32_t mgmt_bridges(const Fabric& f) {
  return (f.config().hosts + kMgmtHostsPerBridge - 1) / kMgmtHostsPerBridge;
}

std::string mgmt_bridge(uint32_t k) { return "br" + std::to_string(k); }

// Names and wiring of one fabric's namespaces.
class Layout {
 public:
  Layout(const Fabric& f, std::string prefix) : f_(f), prefix_(std::move(prefix)) {}

  const Fabric& fabric() const { return f_; }
  const std::string& prefix() const { return prefix_; }

  std::string ns(const Node& n) const {
    return n.is_host ? host_ns(prefix_, n.host) : prefix_ + "-" + f_.switch_name(n.sw);
  }

  std::vector<Node> switches() const {
    std::vector<Node> v;
    for (uint32_t p = 0; p < f_.config().planes; ++p) {
      for (uint32_t t = 0; t < f_.t0s(); ++t) v.push_back(Node{false, 0, {Tier::kT0, p, t}});
      for (uint32_t s = 0; s < f_.config().spines; ++s) {
        v.push_back(Node{false, 0, {Tier::kT1, p, s}});
      }
    }
    return v;
  }

  std::vector<Node> nodes() const {
    std::vector<Node> v;
    for (uint32_t h = 0; h < f_.config().hosts; ++h) v.push_back(Node{true, h, {}});
    for (const Node& n : switches()) v.push_back(n);
    return v;
  }

  // The cables of a switch, each with the switch at end a.
  std::vector<Cable> cables_of(SwitchId s) const {
    std::vector<Cable> v;
    for (const srv6::Port& p : f_.ports(s)) {
      Node peer;
      if (p.to_host) {
        peer = Node{true, p.peer, {}};
      } else {
        peer = Node{false, 0, {s.tier == Tier::kT0 ? Tier::kT1 : Tier::kT0, s.plane, p.peer}};
      }
      v.push_back(Cable{End{Node{false, 0, s}, p.ifname}, End{peer, p.peer_if}});
    }
    return v;
  }

  // Every cable once: all T0 ports.
  std::vector<Cable> cables() const {
    std::vector<Cable> v;
    for (const Node& n : switches()) {
      if (n.sw.tier != Tier::kT0) continue;
      for (const Cable& c : cables_of(n.sw)) v.push_back(c);
    }
    return v;
  }

  // The cables a (validated) target covers.
  std::vector<Cable> cables(const Target& t) const {
    switch (t.kind) {
      case Target::Kind::kT0:
        return cables_of({Tier::kT0, t.plane, t.t0});
      case Target::Kind::kT0OfHost:
        return cables_of({Tier::kT0, t.plane, f_.t0_of(t.host)});
      case Target::Kind::kT1:
        return cables_of({Tier::kT1, t.plane, t.spine});
      case Target::Kind::kUplink:
      case Target::Kind::kHostLink: {
        const bool host = t.kind == Target::Kind::kHostLink;
        const SwitchId t0{Tier::kT0, t.plane, host ? f_.t0_of(t.host) : t.t0};
        for (const Cable& c : cables_of(t0)) {
          const bool match = host ? (c.b.node.is_host && c.b.node.host == t.host)
                                  : (!c.b.node.is_host && c.b.node.sw.index == t.spine);
          if (match) return {c};
        }
        return {};
      }
    }
    return {};
  }

  std::vector<std::string> ports(const Node& n) const {
    std::vector<std::string> v;
    if (n.is_host) {
      for (uint32_t p = 0; p < f_.config().planes; ++p) v.push_back(f_.host_ifname(n.host, p));
    } else {
      for (const srv6::Port& p : f_.ports(n.sw)) v.push_back(p.ifname);
    }
    return v;
  }

  // Whether port `ifname` of n is on a host link (where tbf sits).
  bool host_link(const Node& n, const std::string& ifname) const {
    if (n.is_host) return true;
    for (const srv6::Port& p : f_.ports(n.sw)) {
      if (p.ifname == ifname) return p.to_host;
    }
    return false;
  }

  srv6::Plan plan(const Node& n) const {
    if (n.is_host) return srv6::host_plan(f_, n.host);
    return srv6::switch_plan(f_, n.sw, kSwitchPlan);
  }

 private:
  const Fabric& f_;
  std::string prefix_;
};

// ---- small helpers ----

Status<std::string> ok_or(const Result<std::string, std::string>& r) {
  if (!r) return Err(r.error());
  return {};
}

Status<std::string> write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Err("write " + path + ": " + std::strerror(errno));
  return {};
}

Result<std::string, std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Err("read " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status<std::string> check_prefix(const std::string& p) {
  static const std::regex re("[A-Za-z][A-Za-z0-9_]{0,31}");
  if (!std::regex_match(p, re)) {
    return Err("prefix '" + p +
               "': must be a letter then letters, digits or '_', at most 32 characters");
  }
  return {};
}

// The fabric's namespaces that exist now, found by name.
std::vector<std::string> existing_netns(const std::string& prefix) {
  const std::regex re(prefix + "-(h[0-9]+|t[01]p[0-9]+-[0-9]+|mgmt)");
  std::vector<std::string> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec)) {
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, re)) v.push_back(name);
  }
  return v;
}

Status<std::string> set_sysctl(const std::string& key, const std::string& value) {
  std::string path = "/proc/sys/" + key;
  std::replace(path.begin() + 10, path.end(), '.', '/');
  return write_file(path, value);
}

// ---- persistent state ----

struct Flapper {
  int pid = 0;
  uint32_t period_ms = 0;
};

// The gray faults of one link that need its eBPF program (gray.h) and delay lines.
struct Gray {
  uint32_t delay_us = 0;
  double corrupt_pct = 0;
  double reorder_pct = 0;
  uint32_t reorder_us = 0;
  std::map<std::string, int> lines;  // "<netns> <ifname>" of an end -> its delay line's pid

  bool active() const { return delay_us > 0 || corrupt_pct > 0 || reorder_pct > 0; }
  bool holds() const { return delay_us > 0 || reorder_pct > 0; }
};

struct State {
  Options opts;
  std::vector<std::string> down;            // canonical targets
  std::set<std::string> blackholed;         // canonical switch targets
  std::set<std::string> blackholed_links;   // canonical link target [+ " up" / " down"]
  std::map<std::string, double> loss;       // canonical link target [+ " up" / " down"] -> %
  std::map<std::string, Flapper> flapping;  // canonical link target
  std::map<std::string, double> degraded;   // canonical link target -> Gbit/s
  std::map<std::string, Gray> gray;         // canonical link target
};

std::string state_file(const std::string& prefix) { return state_dir(prefix) + "/state.json"; }

Status<std::string> save(const State& s) {
  nlohmann::json j;
  j["options"] = {{"prefix", s.opts.prefix},
                  {"mtu", s.opts.mtu},
                  {"gso", s.opts.gso},
                  {"use_netlink", s.opts.use_netlink},
                  {"shape", s.opts.shape},
                  {"mgmt", s.opts.mgmt}};
  j["down"] = s.down;
  j["blackhole"] = s.blackholed;
  j["loss"] = s.loss;
  j["blackhole_link"] = s.blackholed_links;
  j["degrade"] = s.degraded;
  nlohmann::json gray = nlohmann::json::object();
  for (const auto& [k, g] : s.gray) {
    gray[k] = {{"delay_us", g.delay_us},
               {"corrupt_pct", g.corrupt_pct},
               {"reorder_pct", g.reorder_pct},
               {"reorder_us", g.reorder_us},
               {"lines", g.lines}};
  }
  j["gray"] = gray;
  nlohmann::json fl = nlohmann::json::object();
  for (const auto& [k, v] : s.flapping) fl[k] = {{"pid", v.pid}, {"period_ms", v.period_ms}};
  j["flap"] = fl;
  const std::string path = state_file(s.opts.prefix);
  if (auto w = write_file(path + ".tmp", j.dump(2) + "\n"); !w) return w;
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
  if (ec) return Err("rename " + path + ": " + ec.message());
  return {};
}

Result<State, std::string> load_state(const std::string& prefix) {
  auto text = read_file(state_file(prefix));
  if (!text) return Err(text.error());
  try {
    const nlohmann::json j = nlohmann::json::parse(*text);
    State s;
    const auto& o = j.at("options");
    s.opts.prefix = o.at("prefix").get<std::string>();
    s.opts.mtu = o.at("mtu").get<int>();
    s.opts.gso = o.at("gso").get<bool>();
    s.opts.use_netlink = o.at("use_netlink").get<bool>();
    s.opts.shape = o.at("shape").get<bool>();
    s.opts.mgmt = o.value("mgmt", false);  // state of a fabric made before it existed
    s.down = j.at("down").get<std::vector<std::string>>();
    s.blackholed = j.at("blackhole").get<std::set<std::string>>();
    s.loss = j.at("loss").get<std::map<std::string, double>>();
    s.blackholed_links = j.value("blackhole_link", std::set<std::string>{});
    s.degraded = j.value("degrade", std::map<std::string, double>{});
    if (j.contains("gray")) {
      for (const auto& [k, v] : j.at("gray").items()) {
        Gray g;
        g.delay_us = v.at("delay_us").get<uint32_t>();
        g.corrupt_pct = v.at("corrupt_pct").get<double>();
        g.reorder_pct = v.at("reorder_pct").get<double>();
        g.reorder_us = v.at("reorder_us").get<uint32_t>();
        g.lines = v.at("lines").get<std::map<std::string, int>>();
        s.gray[k] = g;
      }
    }
    for (const auto& [k, v] : j.at("flap").items()) {
      s.flapping[k] = Flapper{v.at("pid").get<int>(), v.at("period_ms").get<uint32_t>()};
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Err(state_file(prefix) + ": " + e.what());
  }
}

// An exclusive flock on the state directory's lock file, for one apply().
class StateLock {
 public:
  explicit StateLock(const std::string& prefix) {
    fd_ = ::open((state_dir(prefix) + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~StateLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  int fd_ = -1;
};

Target parse_target_text(const std::string& text) {
  auto f = parse_fault("down " + text);
  return f ? std::get<ElementFault>(*f).target : Target{};
}

// A link key with its direction: "link h0 p1 up" -> (link h0 p1, kUp).
std::pair<Target, Direction> parse_directed(const std::string& key) {
  for (const auto& [word, dir] :
       {std::pair<const char*, Direction>{" up", Direction::kUp}, {" down", Direction::kDown}}) {
    if (key.ends_with(word)) {
      return {parse_target_text(key.substr(0, key.size() - std::strlen(word))), dir};
    }
  }
  return {parse_target_text(key), Direction::kBoth};
}

std::string directed_key(const std::string& key, Direction d) {
  return key + (d == Direction::kUp ? " up" : d == Direction::kDown ? " down" : "");
}

// ---- links, plans, nftables ----

// Sets the given ends up or down, grouped by namespace; with `up`, then re-applies the
// plans of their namespaces (Linux deleted the routes through them when they went down).
// Every end goes up before any plan is applied, and then the ends' neighbour entries are
// flushed: an entry made by traffic while the link was down (or before its other end was up)
// sits INCOMPLETE, its solicitation lost, and Linux sends the next one only retrans_time_ms
// (1 s) later: the repaired plane stayed dark for a second after `up` (issue 16). A fresh
// entry solicits at once.
Status<std::string> set_ends(const Layout& l, const std::vector<End>& ends, bool up) {
  std::map<std::string, std::pair<Node, std::vector<std::string>>> by_ns;
  for (const End& e : ends) {
    auto& slot = by_ns[l.ns(e.node)];
    slot.first = e.node;
    slot.second.push_back(e.ifname);
  }
  for (const auto& [ns, entry] : by_ns) {
    const auto& ifs = entry.second;
    auto s = mrc::in_netns(ns, [&]() -> Status<std::string> {
      for (const std::string& i : ifs) {
        if (auto r = srv6::set_link_up(i, up); !r) return r;
      }
      return {};
    });
    if (!s) return Err(ns + ": " + s.error());
  }
  if (!up) return {};
  for (const auto& [ns, entry] : by_ns) {
    const Node& node = entry.first;
    auto s = mrc::in_netns(ns, [&]() -> Status<std::string> { return srv6::apply(l.plan(node)); });
    if (!s) return Err(ns + ": " + s.error());
  }
  // Addresses kept over the down (keep_addr_on_down) come back tentative until the kernel
  // redoes DAD (instant with accept_dad=0, but asynchronous): wait for that, then flush.
  for (int tries = 0; tries < 100; ++tries) {  // up to ~1 s
    bool tentative = false;
    for (const auto& [ns, entry] : by_ns) {
      for (const std::string& i : entry.second) {
        auto r = run_command({"ip", "-n", ns, "-6", "-o", "addr", "show", "dev", i, "tentative"});
        tentative = tentative || (r && !r->empty());
      }
    }
    if (!tentative) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (const auto& [ns, entry] : by_ns) {
    std::string flush;
    for (const std::string& i : entry.second) flush += "neigh flush dev " + i + "\n";
    if (auto r = run_command({"ip", "-n", ns, "-batch", "-"}, flush); !r) return Err(r.error());
  }
  return {};
}

Status<std::string> set_cables(const Layout& l, const std::vector<Cable>& cables, bool up) {
  std::vector<End> ends;
  for (const Cable& c : cables) {
    ends.push_back(c.a);
    ends.push_back(c.b);
  }
  return set_ends(l, ends, up);
}

std::string fault_table(const std::string& prefix) { return prefix + "_fault"; }

std::string switch_key(SwitchId s) {
  return to_string(s.tier == Tier::kT0 ? Target{Target::Kind::kT0, s.plane, s.index, 0, 0}
                                       : Target{Target::Kind::kT1, s.plane, 0, s.index, 0});
}

// Rewrites namespace ns's fault table from the state: forwarded packets dropped if the
// switch is blackholed, and random loss on the ends of lossy links in it.
Status<std::string> write_fault_table(const Layout& l, const State& st, const Node& node) {
  const std::string ns = l.ns(node);
  std::string forward, output;
  if (!node.is_host && st.blackholed.count(switch_key(node.sw))) {
    forward = "    counter drop comment \"blackhole\"\n";
  }
  // A loss or link blackhole in direction d drops at the egress of the ends that send that
  // way: up leaves the lower end (a host link's host, an uplink's T0; cable end b and a).
  const auto add_drops = [&](const std::string& key, const std::string& match,
                             const std::string& what) {
    const auto [target, dir] = parse_directed(key);
    for (const Cable& c : l.cables(target)) {
      const End& lower = c.b.node.is_host ? c.b : c.a;
      const End& upper = c.b.node.is_host ? c.a : c.b;
      for (const End* e : {&lower, &upper}) {
        if (dir == Direction::kUp && e != &lower) continue;
        if (dir == Direction::kDown && e != &upper) continue;
        const std::string comment = "counter drop comment \"" + what + " " + key + "\"\n";
        if (e->node.is_host) {
          // Dropped where the T0 forwards what the host sent, not in the host's output (where
          // the sender would see EPERM): a link loses silently.
          if (l.ns(upper.node) == ns) {
            forward += "    iifname \"" + upper.ifname + "\" " + match + comment;
          }
          continue;
        }
        if (l.ns(e->node) != ns) continue;
        const std::string rule = "    oifname \"" + e->ifname + "\" " + match + comment;
        forward += rule;
        output += rule;
      }
    }
  };
  for (const auto& [link, pct] : st.loss) {
    // nft takes "< 10000" after "mod 10000" as out of range: 100% is a plain drop.
    const long per10k = std::lround(pct * 100);
    add_drops(link,
              per10k >= 10000 ? "" : "numgen random mod 10000 < " + std::to_string(per10k) + " ",
              "loss");
  }
  for (const std::string& link : st.blackholed_links) add_drops(link, "", "blackhole");
  // Neighbour discovery is exempt: a lossy link still resolves its next hops.
  if (!output.empty()) {
    output = "    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept\n" + output;
  }
  const std::string t = "inet " + fault_table(l.prefix());
  std::string script = "table " + t + "\ndelete table " + t + "\n";
  if (!forward.empty() || !output.empty()) {
    script += "table " + t + " {\n  chain forward {\n    type filter hook forward priority 0;\n" +
              forward + "  }\n  chain output {\n    type filter hook output priority 0;\n" +
              output + "  }\n}\n";
  }
  return ok_or(run_command({"ip", "netns", "exec", ns, "nft", "-f", "-"}, script));
}

// ---- flappers ----

bool is_flapper(int pid) { return is_named_process(pid, kFlapperName); }

void stop_flapper(int pid) { stop_named_process(pid, kFlapperName); }

// Forks the flapper: a process that outlives this one (a CLI call) and toggles the cable.
Result<int, std::string> start_flapper(const Layout& l, const Cable& c, uint32_t period_ms) {
  const pid_t pid = fork();
  if (pid < 0) return Err("fork: " + std::string(std::strerror(errno)));
  if (pid > 0) return static_cast<int>(pid);
  reset_signals_in_child();
  setsid();
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
  close_range(3, ~0u, 0);  // also the parent's state lock
  prctl(PR_SET_NAME, kFlapperName);
  const auto half = std::chrono::milliseconds(period_ms / 2);
  const std::string ns_a = "/run/netns/" + l.ns(c.a.node);
  const std::string ns_b = "/run/netns/" + l.ns(c.b.node);
  for (bool up = false;; up = !up) {
    if (access(ns_a.c_str(), F_OK) != 0 || access(ns_b.c_str(), F_OK) != 0) _exit(0);
    (void)set_cables(l, {c}, up);
    std::this_thread::sleep_for(half);
  }
}

// ---- faults ----

Status<std::string> validate(const Fabric& f, const Target& t) {
  const auto& c = f.config();
  const auto range = [&](const std::string& what, uint32_t v, uint32_t n,
                         const std::string& things) -> Status<std::string> {
    if (v < n) return {};
    return Err(to_string(t) + ": " + what + " " + std::to_string(v) + " out of range (fabric has " +
               std::to_string(n) + " " + things + ")");
  };
  if (auto s = range("plane", t.plane, c.planes, "planes"); !s) return s;
  const bool has_t0 = t.kind == Target::Kind::kT0 || t.kind == Target::Kind::kUplink;
  const bool has_spine = t.kind == Target::Kind::kT1 || t.kind == Target::Kind::kUplink;
  const bool has_host = t.kind == Target::Kind::kT0OfHost || t.kind == Target::Kind::kHostLink;
  if (has_t0) {
    if (auto s = range("T0", t.t0, f.t0s(), "T0s per plane"); !s) return s;
  }
  if (has_spine) {
    if (auto s = range("spine", t.spine, c.spines, "spines per plane"); !s) return s;
  }
  if (has_host) {
    if (auto s = range("host", t.host, c.hosts, "hosts"); !s) return s;
  }
  return {};
}

Target canonical(const Fabric& f, Target t) {
  if (t.kind == Target::Kind::kT0OfHost) {
    t = Target{Target::Kind::kT0, t.plane, f.t0_of(t.host), 0, 0};
  }
  return t;
}

// Whether cable c belongs to any of `targets` (canonical target strings).
bool covered(const Layout& l, const std::vector<std::string>& targets, const Cable& c) {
  for (const std::string& key : targets) {
    for (const Cable& d : l.cables(parse_target_text(key))) {
      if (d == c) return true;
    }
  }
  return false;
}

std::vector<std::string> keys(const std::map<std::string, Flapper>& m) {
  std::vector<std::string> v;
  for (const auto& [k, f] : m) v.push_back(k);
  return v;
}

std::string rate_bits(double gbps);

// Both ends of cable c send at most `gbps` (tbf), or with 0 as built: a host link's port rate
// (Options::shape), an uplink unshaped.
Status<std::string> set_rate(const Layout& l, const State& st, const Cable& c, double gbps) {
  for (const End& e : {c.a, c.b}) {
    const std::string ns = l.ns(e.node);
    const bool host_link = c.b.node.is_host;
    if (gbps == 0 && !(host_link && st.opts.shape)) {
      (void)run_command({"tc", "-n", ns, "qdisc", "del", "dev", e.ifname, "root"});
      continue;
    }
    const double rate = gbps > 0 ? gbps : l.fabric().config().host_port_gbps;
    auto r = run_command({"tc", "-n", ns, "qdisc", "replace", "dev", e.ifname, "root", "tbf",
                          "rate", rate_bits(rate), "burst", std::to_string(kTbfBurstBytes), "limit",
                          std::to_string(kTbfLimitBytes)});
    if (!r) return Err(r.error());
  }
  return {};
}

// Where the delay line of port `ifname` in `ns` writes its drop counts (delay_line.h).
std::string line_drops_file(const std::string& prefix, const std::string& ns,
                            const std::string& ifname) {
  return state_dir(prefix) + "/lines/" + ns + "-" + ifname + ".drops";
}

// The rate a link's traffic leaves an end at, Gbit/s (0: unknown, unshaped): a degrade's,
// else a host link's port rate, else (an uplink) the port rates of the hosts under its T0.
double link_gbps(const Layout& l, const State& st, const std::string& key, const Target& t) {
  if (auto d = st.degraded.find(key); d != st.degraded.end()) return d->second;
  const auto& c = l.fabric().config();
  return t.kind == Target::Kind::kHostLink ? c.host_port_gbps : c.host_port_gbps * c.hosts_per_t0;
}

// Refuses gray faults whose delay line would hold more than kMaxHeldBytes at the link's rate
// (it would drop the rest).
Status<std::string> check_line_holds(const Layout& l, const State& st, const std::string& key,
                                     const Target& t, const Gray& g) {
  const double gbps = link_gbps(l, st, key, t);
  if (!g.holds() || gbps <= 0) return {};
  // What the line holds on average: every packet delay_us, the reordered share reorder_us more.
  const double held_us = g.delay_us + g.reorder_pct / 100 * g.reorder_us;
  const double bytes = gbps * 1e9 / 8 * held_us * 1e-6;
  if (bytes <= static_cast<double>(kMaxHeldBytes)) return {};
  const double max_us = static_cast<double>(kMaxHeldBytes) * 8 / (gbps * 1e9) * 1e6;
  char msg[320];
  std::snprintf(msg, sizeof msg,
                "%s: holding %.0f us at the link's %g Gbit/s is %.0f MiB, more than a delay "
                "line holds (%zu MiB); at this rate at most %.0f us",
                key.c_str(), held_us, gbps, bytes / (1 << 20), kMaxHeldBytes >> 20, max_us);
  return Err(std::string(msg));
}

// Moves cable c's ends from the gray faults `before` to `g` (g.lines is updated): programs
// attached, replaced or removed, delay lines started or stopped. Both ends first stop sending
// to their lines, then the lines get the time to send what they hold (once, for both) and are
// stopped, then the new lines start.
Status<std::string> set_gray(const Layout& l, const Cable& c, const Gray& before, Gray& g) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir(l.prefix()) + "/lines", ec);
  const uint32_t per10k_reorder = static_cast<uint32_t>(std::lround(g.reorder_pct * 100));
  GrayConfig cfg;
  cfg.corrupt_per10k = static_cast<uint32_t>(std::lround(g.corrupt_pct * 100));
  // Without the lines first: packets pass straight while they drain and are replaced.
  for (const End& e : {c.a, c.b}) {
    const std::string ns = l.ns(e.node);
    if (g.corrupt_pct > 0) {
      if (auto s = attach_gray(ns, e.ifname, cfg); !s) return s;
    } else if (before.active()) {
      (void)detach_gray(ns, e.ifname);
    }
  }
  if (!g.lines.empty()) {
    std::this_thread::sleep_for(std::chrono::microseconds(before.delay_us + before.reorder_us) +
                                std::chrono::milliseconds(2));
    for (const End& e : {c.a, c.b}) {
      const std::string ns = l.ns(e.node);
      if (auto it = g.lines.find(ns + " " + e.ifname); it != g.lines.end()) {
        stop_delay_line(ns, e.ifname, it->second);
        std::filesystem::remove(line_drops_file(l.prefix(), ns, e.ifname), ec);
        g.lines.erase(it);
      }
    }
  }
  if (!g.holds()) return {};
  for (const End& e : {c.a, c.b}) {
    const std::string ns = l.ns(e.node);
    DelayLineConfig line;
    line.base_us = g.delay_us;
    line.extra_us = g.reorder_us;
    line.extra_per10k = g.delay_us > 0 ? per10k_reorder : 10000;
    line.drops_file = line_drops_file(l.prefix(), ns, e.ifname);
    auto started = start_delay_line(ns, e.ifname, line);
    if (!started) return Err(started.error());
    g.lines[ns + " " + e.ifname] = started->pid;
    GrayConfig held = cfg;
    held.hold_per10k = g.delay_us > 0 ? 10000 : per10k_reorder;
    held.line_ifindex = started->capture_ifindex;
    if (auto s = attach_gray(ns, e.ifname, held); !s) return s;
  }
  return {};
}

Status<std::string> apply_element(const Layout& l, const ElementFault& f) {
  if (auto v = validate(l.fabric(), f.target); !v) return v;
  const Target t = canonical(l.fabric(), f.target);
  const std::string key = to_string(t);
  StateLock lock(l.prefix());
  auto loaded = load_state(l.prefix());
  if (!loaded) return Err(loaded.error());
  State st = std::move(loaded).value();
  const std::vector<Cable> cables = l.cables(t);
  const auto is_down = [&] {
    return std::find(st.down.begin(), st.down.end(), key) != st.down.end();
  };

  switch (f.action) {
    case Action::kDown: {
      for (const Cable& c : cables) {
        if (covered(l, keys(st.flapping), c)) {
          return Err(key + ": a link of it is flapping (unflap it first)");
        }
      }
      if (auto s = set_cables(l, cables, false); !s) return s;
      if (!is_down()) st.down.push_back(key);
      break;
    }
    case Action::kUp:
    case Action::kUnflap: {
      if (f.action == Action::kUp) {
        st.down.erase(std::remove(st.down.begin(), st.down.end(), key), st.down.end());
      } else if (auto it = st.flapping.find(key); it != st.flapping.end()) {
        stop_flapper(it->second.pid);
        st.flapping.erase(it);
      }
      std::vector<Cable> restore;
      for (const Cable& c : cables) {
        if (!covered(l, st.down, c)) restore.push_back(c);
      }
      if (auto s = set_cables(l, restore, true); !s) return s;
      break;
    }
    case Action::kBlackhole:
    case Action::kUnblackhole:
      if (!t.is_switch()) {  // a link: one direction or both, beside its loss
        const std::string dkey = directed_key(key, f.dir);
        if (f.action == Action::kBlackhole) {
          st.blackholed_links.insert(dkey);
        } else {
          st.blackholed_links.erase(dkey);
        }
        for (const Node& n : {cables.front().a.node, cables.front().b.node}) {
          if (auto s = write_fault_table(l, st, n); !s) return s;
        }
        break;
      }
      if (f.action == Action::kBlackhole) {
        st.blackholed.insert(key);
      } else {
        st.blackholed.erase(key);
      }
      if (auto s = write_fault_table(l, st, cables.front().a.node); !s) return s;
      break;
    case Action::kLoss:
      if (f.loss_pct > 0) {
        st.loss[directed_key(key, f.dir)] = f.loss_pct;
      } else {
        st.loss.erase(directed_key(key, f.dir));
      }
      for (const Node& n : {cables.front().a.node, cables.front().b.node}) {
        if (auto s = write_fault_table(l, st, n); !s) return s;
      }
      break;
    case Action::kDegrade:
      if (auto s = set_rate(l, st, cables.front(), f.gbps); !s) {
        // One end may have the new rate: both back to what the state says.
        const auto was = st.degraded.find(key);
        (void)set_rate(l, st, cables.front(), was == st.degraded.end() ? 0 : was->second);
        return s;
      }
      if (f.gbps > 0) {
        st.degraded[key] = f.gbps;
      } else {
        st.degraded.erase(key);
      }
      break;
    case Action::kDelay:
    case Action::kCorrupt:
    case Action::kReorder: {
      Gray& g = st.gray[key];
      const Gray before = g;
      if (f.action == Action::kDelay) g.delay_us = f.us;
      if (f.action == Action::kCorrupt) g.corrupt_pct = f.loss_pct;
      if (f.action == Action::kReorder) {
        g.reorder_pct = f.loss_pct;
        g.reorder_us = f.loss_pct > 0 ? f.us : 0;
      }
      if (auto h = check_line_holds(l, st, key, t, g); !h) {
        g = before;
        if (!g.active()) st.gray.erase(key);
        return h;
      }
      auto s = set_gray(l, cables.front(), before, g);
      if (!g.active()) st.gray.erase(key);
      if (!s) {
        (void)save(st);  // the delay lines it did start are recorded, for down()
        return s;
      }
      break;
    }
    case Action::kFlap: {
      if (st.flapping.count(key)) return Err(key + ": already flapping (unflap it first)");
      if (covered(l, st.down, cables.front())) return Err(key + ": is down (up it first)");
      auto pid = start_flapper(l, cables.front(), f.period_ms);
      if (!pid) return Err(pid.error());
      st.flapping[key] = Flapper{*pid, f.period_ms};
      break;
    }
  }
  return save(st);
}

// ---- building ----

Status<std::string> set_sysctls(bool is_switch) {
  std::vector<std::pair<std::string, std::string>> kv = {
      {"net.ipv6.conf.default.accept_dad", "0"},
      {"net.ipv6.conf.all.accept_dad", "0"},
      {"net.ipv6.conf.default.addr_gen_mode", "1"},
      {"net.ipv6.conf.default.keep_addr_on_down", "1"},
      {"net.ipv6.conf.all.keep_addr_on_down", "1"},
  };
  if (is_switch) {
    kv.insert(kv.end(), {{"net.ipv6.conf.all.forwarding", "1"},
                         {"net.ipv6.conf.default.seg6_enabled", "1"},
                         {"net.ipv6.conf.all.seg6_enabled", "1"},
                         {"net.ipv6.fib_multipath_hash_policy", "1"}});
  }
  for (const auto& [k, v] : kv) {
    if (auto s = set_sysctl(k, v); !s) return s;
  }
  return srv6::set_link_up("lo", true);
}

// `ip addr add <addr>/<len> dev <ifname>` for IPv4, in the calling thread's namespace.
Status<std::string> add_ipv4(const std::string& ifname, const std::string& addr, int len) {
  const std::string what = "ip addr add " + addr + "/" + std::to_string(len) + " dev " + ifname;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  auto* sin = reinterpret_cast<sockaddr_in*>(&ifr.ifr_addr);
  sin->sin_family = AF_INET;
  if (inet_pton(AF_INET, addr.c_str(), &sin->sin_addr) != 1) {
    return Err(what + ": not an IPv4 address");
  }
  const UniqueFd s(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0 || ioctl(s.get(), SIOCSIFADDR, &ifr) != 0) {
    return Err(what + ": " + std::strerror(errno));
  }
  sin->sin_addr.s_addr = htonl(~0u << (32 - len));  // SIOCSIFADDR set the class A mask
  if (ioctl(s.get(), SIOCSIFNETMASK, &ifr) != 0) return Err(what + ": " + std::strerror(errno));
  return {};
}

// Host h's end of the management network, in its namespace: IPv6 off, up, its address.
Status<std::string> set_mgmt_port(uint32_t h) {
  if (auto s = set_sysctl("net.ipv6.conf." + std::string(kMgmtDev) + ".disable_ipv6", "1"); !s) {
    return s;
  }
  if (auto s = add_ipv4(kMgmtDev, mgmt_address(h), kMgmtPrefixLen); !s) return s;
  return srv6::set_link_up(kMgmtDev, true);
}

std::string rate_bits(double gbps) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0fbit", gbps * 1e9);
  return buf;
}

std::string gbps_string(double gbps) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g Gbit/s", gbps);
  return buf;
}

Status<std::string> build(const Layout& l, const Options& o) {
  const Fabric& f = l.fabric();
  const std::vector<Node> nodes = l.nodes();
  const std::string mgmt = mgmt_ns(l.prefix());
  std::string batch;
  for (const Node& n : nodes) batch += "netns add " + l.ns(n) + "\n";
  if (o.mgmt) batch += "netns add " + mgmt + "\n";
  if (auto s = ok_or(run_command({"ip", "-batch", "-"}, batch)); !s) return s;

  for (const Node& n : nodes) {
    auto s = mrc::in_netns(l.ns(n), [&] { return set_sysctls(!n.is_host); });
    if (!s) return Err(l.ns(n) + ": " + s.error());
  }
  if (o.mgmt) {
    auto s = mrc::in_netns(mgmt, [&]() -> Status<std::string> {
      for (const char* k :
           {"net.ipv6.conf.default.disable_ipv6", "net.ipv6.conf.all.disable_ipv6"}) {
        if (auto r = set_sysctl(k, "1"); !r) return r;
      }
      return srv6::set_link_up("lo", true);
    });
    if (!s) return Err(mgmt + ": " + s.error());
  }

  batch.clear();
  const std::string mtu = std::to_string(o.mtu);
  for (const Cable& c : l.cables()) {
    batch += "link add " + c.a.ifname + " netns " + l.ns(c.a.node) + " mtu " + mtu +
             " type veth peer name " + c.b.ifname + " netns " + l.ns(c.b.node) + " mtu " + mtu +
             "\n";
  }
  for (const Node& n : l.switches()) {
    batch += "link add " + std::string(kEndDev) + " netns " + l.ns(n) + " type veth peer name " +
             kEndDev + "-peer netns " + l.ns(n) + "\n";
  }
  std::string mgmt_batch;  // run in P-mgmt
  if (o.mgmt) {
    for (uint32_t k = 0; k < mgmt_bridges(f); ++k) {
      const std::string br = mgmt_bridge(k);
      batch += "link add " + br + " netns " + mgmt + " type bridge\n";
      mgmt_batch += "link set " + br + " up\n";
      if (k == 0) continue;
      batch += "link add " + br + "-up netns " + mgmt + " type veth peer name " + br +
               "-dn netns " + mgmt + "\n";
      mgmt_batch += "link set " + br + "-up master " + br + " up\n" + "link set " + br +
                    "-dn master " + mgmt_bridge(0) + " up\n";
    }
    for (uint32_t h = 0; h < f.config().hosts; ++h) {
      const std::string peer = "h" + std::to_string(h);
      batch += "link add " + std::string(kMgmtDev) + " netns " + host_ns(l.prefix(), h) +
               " type veth peer name " + peer + " netns " + mgmt + "\n";
      mgmt_batch +=
          "link set " + peer + " master " + mgmt_bridge(h / kMgmtHostsPerBridge) + " up\n";
    }
  }
  if (auto s = ok_or(run_command({"ip", "-batch", "-"}, batch)); !s) return s;
  if (o.mgmt) {
    if (auto s = ok_or(run_command({"ip", "-n", mgmt, "-batch", "-"}, mgmt_batch)); !s) return s;
  }

  for (const Node& n : nodes) {
    const std::string ns = l.ns(n);
    const srv6::Plan plan = l.plan(n);
    std::vector<std::string> ifs = l.ports(n);
    if (!n.is_host) ifs.insert(ifs.end(), {kEndDev, kEndDev + std::string("-peer")});
    auto s = mrc::in_netns(ns, [&]() -> Status<std::string> {
      for (const std::string& i : ifs) {
        if (auto r = srv6::set_link_up(i, true); !r) return r;
      }
      // A lost neighbour solicitation (a port's queue full, a backlog drop under load) is sent
      // again after kNeighRetransMs, not Linux's 1 s: a fresh fabric's plane stayed dark for a
      // whole short run (NsCapture.ReadRunTrimmed: its T0's entry for the host INCOMPLETE).
      // Per port: a namespace other than the first has no neigh "default" to inherit from.
      for (const std::string& i : l.ports(n)) {
        for (const char* v : {"ipv6", "ipv4"}) {
          const std::string k = std::string("net.") + v + ".neigh." + i + ".retrans_time_ms";
          if (auto r = set_sysctl(k, std::to_string(kNeighRetransMs)); !r) return r;
        }
      }
      if (n.is_host && o.mgmt) {
        if (auto r = set_mgmt_port(n.host); !r) return r;
      }
      if (o.use_netlink) return srv6::apply(plan);
      return {};
    });
    if (!s) return Err(ns + ": " + s.error());
    if (!o.use_netlink) {
      std::string lines;
      for (const std::string& c : srv6::ip_commands(plan)) lines += c.substr(6) + "\n";  // "ip -6 "
      if (auto r = ok_or(run_command({"ip", "-6", "-n", ns, "-batch", "-"}, lines)); !r) return r;
    }
  }

  for (uint32_t h = 0; h < f.config().hosts; ++h) {
    for (uint32_t p = 0; p < f.config().planes; ++p) {
      const Cable c = l.cables(Target{Target::Kind::kHostLink, p, 0, 0, h}).front();
      if (o.shape) {
        for (const End& e : {c.a, c.b}) {
          const std::string rate = rate_bits(f.config().host_port_gbps);
          auto r =
              run_command({"tc", "-n", l.ns(e.node), "qdisc", "replace", "dev", e.ifname, "root",
                           "tbf", "rate", rate, "burst", std::to_string(kTbfBurstBytes), "limit",
                           std::to_string(kTbfLimitBytes)});
          if (!r) return Err(r.error());
        }
      }
      if (!o.gso) {
        auto r = run_command({"ip", "netns", "exec", l.ns(c.b.node), "ethtool", "-K", c.b.ifname,
                              "tx-udp-segmentation", "off"});
        if (!r) return Err(r.error());
      }
    }
  }
  return {};
}

Status<std::string> check_options(const Fabric& f, const Options& o) {
  if (auto s = check_prefix(o.prefix); !s) return s;
  if (o.mtu < 1280 || o.mtu > 65535) {
    return Err("mtu: must be 1280..65535, got " + std::to_string(o.mtu));
  }
  if (o.shape && f.config().host_port_gbps > kMaxShapedGbps) {
    return Err("host_port_gbps: tbf shapes at most " + gbps_string(kMaxShapedGbps) + ", got " +
               gbps_string(f.config().host_port_gbps) + " (turn shaping off)");
  }
  if (o.mgmt && f.config().hosts > kMaxMgmtHosts) {
    return Err("hosts: the management network addresses at most " + std::to_string(kMaxMgmtHosts) +
               " hosts, got " + std::to_string(f.config().hosts) + " (turn it off)");
  }
  return {};
}

// Every host's MRC configuration file (mrc/io/config.h) under state_dir/hosts.
Status<std::string> write_host_configs(const Fabric& f, const std::string& prefix) {
  const std::string dir = state_dir(prefix) + "/hosts";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Err("mkdir " + dir + ": " + ec.message());
  for (uint32_t h = 0; h < f.config().hosts; ++h) {
    const nlohmann::json j = {
        {"path_mode", "srv6"}, {"fabric", state_dir(prefix) + "/fabric.json"}, {"host", h}};
    if (auto s = write_file(host_config_file(prefix, h), j.dump(2) + "\n"); !s) return s;
  }
  return {};
}

// ---- status ----

std::string tbf_counters(const std::string& ns, const std::string& dev) {
  auto r = run_command({"tc", "-n", ns, "-s", "qdisc", "show", "dev", dev});
  if (!r) return "";
  std::istringstream in(*r);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("Sent ");
    if (r->find("tbf") != std::string::npos && at != std::string::npos) {
      return " [tbf " + line.substr(at) + "]";
    }
  }
  return "";
}

std::string fault_counters(const std::string& ns, const std::string& table) {
  auto r = run_command({"ip", "netns", "exec", ns, "nft", "list", "table", "inet", table});
  if (!r) return "";
  std::string s, chain;
  std::istringstream in(*r);
  for (std::string line; std::getline(in, line);) {
    line.erase(0, line.find_first_not_of(" \t"));
    if (line.starts_with("chain ")) chain = line.substr(6, line.find(' ', 6) - 6);
    if (line.find("counter") != std::string::npos) s += "\n  nft " + chain + ": " + line;
  }
  return s;
}

}  // namespace

std::string state_dir(const std::string& prefix) { return "/run/mrc-fabric/" + prefix; }

std::string mgmt_address(uint32_t host) {
  return "10.255." + std::to_string(host / 250) + "." + std::to_string(host % 250 + 1);
}

std::string NsFabric::host_netns(uint32_t host) const { return host_ns(opts_.prefix, host); }

std::string NsFabric::mgmt_netns() const { return mgmt_ns(opts_.prefix); }

std::string NsFabric::host_config(uint32_t host) const {
  return host_config_file(opts_.prefix, host);
}

std::string NsFabric::switch_netns(SwitchId s) const {
  return opts_.prefix + "-" + fabric_.switch_name(s);
}

Result<NsFabric, std::string> NsFabric::up(const Fabric& f, const Options& o) {
  if (auto s = check_options(f, o); !s) return Err(s.error());
  std::error_code ec;
  if (fs::exists(state_dir(o.prefix), ec) || !existing_netns(o.prefix).empty()) {
    return Err("fabric '" + o.prefix + "' exists (take it down first: mrc-fabric down --prefix " +
               o.prefix + ")");
  }
  fs::create_directories(state_dir(o.prefix), ec);
  if (ec) return Err("mkdir " + state_dir(o.prefix) + ": " + ec.message());
  NsFabric nf(f, o);
  Status<std::string> s = write_file(state_dir(o.prefix) + "/fabric.json", srv6::dump(f) + "\n");
  if (s) s = save(State{o, {}, {}, {}, {}});
  if (s) s = write_host_configs(f, o.prefix);
  if (s) s = build(Layout(nf.fabric_, o.prefix), o);
  if (!s) {
    (void)down(o.prefix);
    return Err("up " + o.prefix + ": " + s.error());
  }
  return nf;
}

Result<NsFabric, std::string> NsFabric::attach(const std::string& prefix) {
  if (auto s = check_prefix(prefix); !s) return Err(s.error());
  const std::string path = state_dir(prefix) + "/fabric.json";
  auto text = read_file(path);
  if (!text) return Err("no fabric '" + prefix + "' (" + text.error() + ")");
  auto f = srv6::load(*text);
  if (!f) return Err(path + f.error());
  auto st = load_state(prefix);
  if (!st) return Err(st.error());
  return NsFabric(std::move(f).value(), st->opts);
}

Status<std::string> NsFabric::down(const std::string& prefix) {
  if (auto s = check_prefix(prefix); !s) return s;
  std::string errors;
  if (auto st = load_state(prefix)) {
    for (const auto& [link, fl] : st->flapping) stop_flapper(fl.pid);
    for (const auto& [link, g] : st->gray) {
      for (const auto& [end, pid] : g.lines) stop_named_process(pid, kDelayLineName);
    }
  }
  const std::vector<std::string> names = existing_netns(prefix);
  if (!names.empty()) {
    std::string batch;
    for (const std::string& n : names) batch += "netns del " + n + "\n";
    if (auto r = run_command({"ip", "-force", "-batch", "-"}, batch); !r) errors = r.error();
  }
  std::error_code ec;
  fs::remove_all(state_dir(prefix), ec);
  if (ec)
    errors += (errors.empty() ? "" : "; ") + ("rm " + state_dir(prefix) + ": " + ec.message());
  if (!errors.empty()) return Err("down " + prefix + ": " + errors);
  return {};
}

// The trimming program on the egress of the link's upper end (trim.h).
Status<std::string> apply_element(const Layout& l, const TrimFault& f) {
  if (auto v = validate(l.fabric(), f.target); !v) return v;
  const std::vector<Cable> cables = l.cables(canonical(l.fabric(), f.target));
  if (cables.size() != 1) return Err(to_string(f.target) + ": not one link");
  const Cable& c = cables[0];
  const End& upper = c.b.node.is_host ? c.a : c.b;  // host link: the T0; uplink: the spine
  const std::string ns = l.ns(upper.node);
  if (!f.on) return detach_trim(ns, upper.ifname);
  TrimConfig cfg;
  cfg.rate_gbps = f.gbps;
  cfg.trim_bytes = f.trim_kb * 1024;
  cfg.ecn_bytes = f.ecn_kb * 1024;
  return attach_trim(ns, upper.ifname, cfg);
}

Status<std::string> NsFabric::apply(const Fault& fault) const {
  const Layout l(fabric_, opts_.prefix);
  return std::visit([&](const auto& f) { return apply_element(l, f); }, fault);
}

std::vector<int> NsFabric::delay_lines() const {
  std::vector<int> v;
  auto st = load_state(opts_.prefix);
  if (!st) return v;
  for (const auto& [link, g] : st->gray) {
    for (const auto& [end, pid] : g.lines) v.push_back(pid);
  }
  return v;
}

std::string NsFabric::status() const {
  const Layout l(fabric_, opts_.prefix);
  const auto& c = fabric_.config();
  std::ostringstream out;
  const std::vector<Node> nodes = l.nodes();
  out << "fabric " << opts_.prefix << ": " << c.hosts << " hosts, " << c.planes << " planes, "
      << fabric_.t0s() << " T0s and " << c.spines << " spines per plane, "
      << nodes.size() + (opts_.mgmt ? 1 : 0) << " namespaces; mtu " << opts_.mtu << ", gso "
      << (opts_.gso ? "on" : "off") << ", host ports "
      << (opts_.shape ? gbps_string(c.host_port_gbps) + " (tbf)" : "unshaped") << "\nmanagement: "
      << (opts_.mgmt ? "IPv4 10.255.0.0/16 on " + std::string(kMgmtDev) +
                           " of every host, bridged in " + mgmt_netns()
                     : std::string("none"))
      << "; host configs: " << state_dir(opts_.prefix) << "/hosts/\n";
  auto st = load_state(opts_.prefix);
  out << "faults:";
  if (!st) {
    out << " (state unreadable: " << st.error() << ")";
  } else {
    for (const std::string& d : st->down) out << "\n  down " << d;
    for (const std::string& b : st->blackholed) out << "\n  blackhole " << b;
    for (const auto& [k, v] : st->loss) {
      const auto [target, dir] = parse_directed(k);
      ElementFault e{Action::kLoss, target, v, 0};
      e.dir = dir;
      out << "\n  " << to_string(Fault{e});
    }
    for (const std::string& k : st->blackholed_links) out << "\n  blackhole " << k;
    for (const auto& [k, v] : st->degraded) out << "\n  degrade " << k << " " << v;
    for (const auto& [k, g] : st->gray) {
      if (g.delay_us > 0) out << "\n  delay " << k << " " << g.delay_us;
      if (g.corrupt_pct > 0) out << "\n  corrupt " << k << " " << g.corrupt_pct;
      if (g.reorder_pct > 0)
        out << "\n  reorder " << k << " " << g.reorder_pct << " " << g.reorder_us;
      for (const auto& [end, pid] : g.lines) {
        out << " (" << end << ": delay line pid " << pid
            << (is_delay_line(pid) ? ", running" : ", NOT running");
        const auto space = end.find(' ');
        auto d = read_delay_line_drops(
            line_drops_file(opts_.prefix, end.substr(0, space), end.substr(space + 1)));
        if (!d) {
          out << ", drops unreadable: " << d.error();
        } else {
          out << ", dropped " << d->over_limit << " over the held limit, " << d->socket
              << " at its socket";
        }
        out << ")";
      }
    }
    for (const auto& [k, v] : st->flapping) {
      out << "\n  flap " << k << " " << v.period_ms << " (pid " << v.pid
          << (is_flapper(v.pid) ? ", running)" : ", NOT running)");
    }
    if (st->down.empty() && st->blackholed.empty() && st->loss.empty() && st->flapping.empty() &&
        st->blackholed_links.empty() && st->degraded.empty() && st->gray.empty()) {
      out << " none";
    }
  }
  out << "\n";
  std::error_code ec;
  const auto link_states = [](const std::string& ns, const std::vector<std::string>& ports) {
    return mrc::in_netns(ns, [&]() -> Result<std::vector<std::string>, std::string> {
      std::vector<std::string> v;
      for (const std::string& p : ports) {
        auto up = srv6::link_is_up(p);
        v.push_back(!up ? "missing" : (*up ? "up" : "DOWN"));
      }
      return v;
    });
  };
  if (opts_.mgmt) {
    const std::string ns = mgmt_netns();
    out << ns << ":";
    if (!fs::exists("/run/netns/" + ns, ec)) {
      out << " MISSING\n";
    } else {
      std::vector<std::string> bridges;
      for (uint32_t k = 0; k < mgmt_bridges(fabric_); ++k) bridges.push_back(mgmt_bridge(k));
      auto states = link_states(ns, bridges);
      for (size_t i = 0; i < bridges.size(); ++i) {
        out << " " << bridges[i] << " " << (states ? (*states)[i] : states.error());
      }
      out << "\n";
    }
  }
  for (const Node& n : nodes) {
    const std::string ns = l.ns(n);
    out << ns << ":";
    if (n.is_host) {
      out << " MRC_CONFIG=" << host_config(n.host);
      if (!fs::exists(host_config(n.host), ec)) out << " (MISSING)";
    }
    if (!fs::exists("/run/netns/" + ns, ec)) {
      out << " MISSING\n";
      continue;
    }
    std::vector<std::string> ports = l.ports(n);
    const bool mgmt_port = n.is_host && opts_.mgmt;
    if (mgmt_port) ports.push_back(kMgmtDev);
    auto states = link_states(ns, ports);
    if (mgmt_port) {
      ports.pop_back();
      out << ", " << kMgmtDev << " " << mgmt_address(n.host) << " "
          << (states ? states->back() : states.error());
    }
    for (size_t i = 0; i < ports.size(); ++i) {
      out << "\n  " << ports[i] << " " << (states ? (*states)[i] : states.error());
      if (opts_.shape && l.host_link(n, ports[i])) out << tbf_counters(ns, ports[i]);
    }
    out << fault_counters(ns, fault_table(opts_.prefix)) << "\n";
  }
  return out.str();
}

}  // namespace mrc::nsfabric

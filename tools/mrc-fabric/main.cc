// mrc-fabric: builds the namespace fabric, injects faults, shows its state, takes it down,
// prints what it programs. Single-threaded CLI over nsfabric.h.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "nsfabric.h"
#include "srv6/config.h"
#include "srv6/export_linux.h"
#include "srv6/export_sonic.h"

namespace {

using mrc::Err;
using mrc::Result;
using mrc::srv6::Fabric;
using mrc::srv6::SwitchId;
using mrc::srv6::Tier;

constexpr int kNetAdmin = 12, kSysAdmin = 21;  // capability bits

bool has_caps() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const uint64_t caps = std::stoull(line.substr(7), nullptr, 16);
    return (caps >> kNetAdmin & 1) && (caps >> kSysAdmin & 1);
  }
  return false;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "mrc-fabric: %s\n", msg.c_str());
  return 1;
}

struct FabricArgs {
  std::string file;
  uint32_t hosts = 0, planes = 0, spines = 0, hosts_per_t0 = 1;
  double rate = -1;  // < 0: not given

  void add(CLI::App* app) {
    auto* f = app->add_option("--fabric", file, "fabric description (JSON, srv6/config.h)");
    auto* h = app->add_option("--hosts", hosts, "hosts");
    auto* p = app->add_option("--planes", planes, "planes (NIC ports per host)");
    auto* s = app->add_option("--spines", spines, "T1 spines per plane");
    auto* t = app->add_option("--hosts-per-t0", hosts_per_t0, "hosts under one T0 (default 1)");
    auto* r = app->add_option("--rate", rate,
                              "host port rate, Gbit/s (tbf); 0: unshaped. Default: the fabric "
                              "file's host_port_gbps, unshaped with --hosts");
    for (CLI::Option* o : {h, p, s, t}) o->excludes(f);
    (void)r;
  }

  Result<Fabric, std::string> make() const {
    if (!file.empty()) {
      std::ifstream in(file);
      if (!in) return Err("cannot read " + file);
      std::stringstream ss;
      ss << in.rdbuf();
      auto f = mrc::srv6::load(ss.str());
      if (!f) return Err(file + ": " + f.error());
      if (rate <= 0) return f;
      return f->with_speeds(rate, f->config().uplink_gbps);
    }
    if (hosts == 0 || planes == 0 || spines == 0) {
      return Err(std::string("give --fabric FILE, or --hosts, --planes and --spines"));
    }
    mrc::srv6::FabricConfig c;
    c.hosts = hosts;
    c.planes = planes;
    c.spines = spines;
    c.hosts_per_t0 = hosts_per_t0;
    if (rate > 0) c.host_port_gbps = rate;
    return Fabric::make(c);
  }

  bool shape() const { return rate < 0 ? !file.empty() : rate > 0; }
};

// "t0p1-0", "t1p0-3" or "h2" -> the plan that mrc-fabric programs there, as text.
Result<std::string, std::string> print_node(const Fabric& f, const std::string& name, bool sonic) {
  std::smatch m;
  if (std::regex_match(name, m, std::regex("h([0-9]{1,6})"))) {
    const uint32_t h = std::stoul(m[1]);
    if (h >= f.config().hosts) {
      return Err("--switch " + name + ": no such host (fabric has " +
                 std::to_string(f.config().hosts) + ")");
    }
    if (sonic) return Err(name + ": --sonic exports switches only");
    return mrc::srv6::join_lines(mrc::srv6::ip_commands(mrc::srv6::host_plan(f, h)));
  }
  if (!std::regex_match(name, m, std::regex("t([01])p([0-9]{1,6})-([0-9]{1,6})"))) {
    return Err("--switch '" + name + "': expected t0p<P>-<T>, t1p<P>-<S> or h<H>");
  }
  const SwitchId s{m[1] == "0" ? Tier::kT0 : Tier::kT1, static_cast<uint32_t>(std::stoul(m[2])),
                   static_cast<uint32_t>(std::stoul(m[3]))};
  const uint32_t n = s.tier == Tier::kT0 ? f.t0s() : f.config().spines;
  if (s.plane >= f.config().planes || s.index >= n) {
    return Err("--switch " + name + ": no such switch (fabric has " +
               std::to_string(f.config().planes) + " planes, " + std::to_string(f.t0s()) +
               " T0s and " + std::to_string(f.config().spines) + " spines per plane)");
  }
  if (sonic) return mrc::srv6::sonic_config(f, s) + "\n";
  return mrc::srv6::join_lines(
      mrc::srv6::ip_commands(mrc::srv6::switch_plan(f, s, mrc::nsfabric::kSwitchPlan)));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mrc-fabric: a multi-plane SRv6 fabric of Linux network namespaces, with faults"};
  app.require_subcommand(1);
  std::string prefix = "mrcf";
  const auto add_prefix = [&](CLI::App* a) {
    a->add_option("--prefix", prefix, "namespace name prefix (default mrcf)");
  };

  auto* up = app.add_subcommand("up", "build the fabric");
  add_prefix(up);
  FabricArgs up_args;
  up_args.add(up);
  int mtu = 9000;
  bool no_gso = false, ip_commands = false, no_mgmt = false;
  up->add_option("--mtu", mtu, "MTU of every link (default 9000)");
  up->add_flag("--no-gso", no_gso, "turn UDP segmentation offload off on host ports");
  up->add_flag("--ip-commands", ip_commands, "program routes with ip commands, not netlink");
  up->add_flag("--no-mgmt", no_mgmt, "no IPv4 management network (<prefix>-mgmt, mgmt0)");

  auto* down = app.add_subcommand("down", "remove the fabric (namespaces, flappers, state)");
  add_prefix(down);
  auto* status = app.add_subcommand(
      "status", "show namespaces, links, faults, counters, management addresses, host configs");
  add_prefix(status);
  auto* fault = app.add_subcommand("fault", "apply a fault, e.g.: fault down t0 h0 p2");
  add_prefix(fault);
  std::vector<std::string> words;
  fault->add_option("words", words, "the fault (tools/mrc-fabric/fault.h)")->required();

  auto* print = app.add_subcommand("print", "print the ip commands (or SONiC config) per node");
  FabricArgs print_args;
  print_args.add(print);
  std::string only;
  bool sonic = false;
  print->add_option("--switch", only, "only this node: t0p<P>-<T>, t1p<P>-<S> or h<H>");
  print->add_flag("--sonic", sonic, "SONiC config_db JSON instead (switches)");

  CLI11_PARSE(app, argc, argv);

  if (print->parsed()) {
    auto f = print_args.make();
    if (!f) return fail(f.error());
    std::vector<std::string> names;
    if (!only.empty()) {
      names.push_back(only);
    } else {
      if (!sonic) {
        for (uint32_t h = 0; h < f->config().hosts; ++h) names.push_back("h" + std::to_string(h));
      }
      for (uint32_t p = 0; p < f->config().planes; ++p) {
        for (uint32_t t = 0; t < f->t0s(); ++t) names.push_back(f->switch_name({Tier::kT0, p, t}));
        for (uint32_t s = 0; s < f->config().spines; ++s) {
          names.push_back(f->switch_name({Tier::kT1, p, s}));
        }
      }
    }
    for (const std::string& n : names) {
      auto text = print_node(*f, n, sonic);
      if (!text) return fail(text.error());
      if (only.empty()) std::printf("# %s\n", n.c_str());
      std::fputs(text->c_str(), stdout);
    }
    return 0;
  }

  if (!has_caps()) {
    std::fprintf(stderr, "mrc-fabric: needs root (CAP_NET_ADMIN) to create network namespaces\n");
    return 2;
  }
  using mrc::nsfabric::NsFabric;
  if (up->parsed()) {
    auto f = up_args.make();
    if (!f) return fail(f.error());
    mrc::nsfabric::Options o;
    o.prefix = prefix;
    o.mtu = mtu;
    o.gso = !no_gso;
    o.use_netlink = !ip_commands;
    o.shape = up_args.shape();
    o.mgmt = !no_mgmt;
    const auto t0 = std::chrono::steady_clock::now();
    auto nf = NsFabric::up(*f, o);
    if (!nf) return fail(nf.error());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& c = f->config();
    std::printf("mrc-fabric: %s up in %.2f s: %u hosts, %u planes, %u T0s + %u spines per plane\n",
                prefix.c_str(), s, c.hosts, c.planes, f->t0s(), c.spines);
    if (o.mgmt) {
      std::printf("mrc-fabric: management network 10.255.0.0/16: h0 %s on %s\n",
                  mrc::nsfabric::mgmt_address(0).c_str(), mrc::nsfabric::kMgmtDev);
    }
    std::printf("mrc-fabric: run as host 0: ip netns exec %s env MRC_CONFIG=%s <program>\n",
                nf->host_netns(0).c_str(), nf->host_config(0).c_str());
    return 0;
  }
  if (down->parsed()) {
    auto s = NsFabric::down(prefix);
    if (!s) return fail(s.error());
    return 0;
  }
  std::string text;
  for (const std::string& w : words) text += (text.empty() ? "" : " ") + w;
  auto parsed = mrc::nsfabric::parse_fault(text);
  if (fault->parsed() && !parsed) return fail(parsed.error());
  auto nf = NsFabric::attach(prefix);
  if (!nf) return fail(nf.error());
  if (status->parsed()) {
    std::fputs(nf->status().c_str(), stdout);
    return 0;
  }
  if (auto s = nf->apply(*parsed); !s) return fail(s.error());
  std::printf("mrc-fabric: %s: %s\n", prefix.c_str(), mrc::nsfabric::to_string(*parsed).c_str());
  return 0;
}

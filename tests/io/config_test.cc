// Host configuration: defaults, file, environment overrides, and the errors that name the field.
#include "mrc/io/config.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>

#include "srv6/config.h"

namespace mrc::io {
namespace {

Getenv env_of(std::map<std::string, std::string> m) {
  return [m](const char* name) -> std::optional<std::string> {
    auto it = m.find(name);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const Result<HostConfig, std::string>& r) { return r.ok() ? "" : r.error(); }

// A temporary file holding `text`; its path (the caller removes it).
std::string temp_file(const std::string& text) {
  char path[] = "/tmp/mrc-config-test-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd >= 0) ::close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(HostConfig, Parse_FileThenEnvironmentWins) {
  auto r = parse_host_config(R"({"planes": ["fd00::1", "fd00:1::1"], "port": 5000, "gso": false})",
                             "test.json", env_of({{"MRC_PORT", "6000"}, {"MRC_GRO", "0"}}));
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->udp.planes.size(), 2u);
  EXPECT_EQ(r->udp.planes[1].address, "fd00:1::1");
  EXPECT_EQ(r->udp.planes[0].port, 6000);
  EXPECT_EQ(r->udp.peer_port, 6000);
  EXPECT_FALSE(r->udp.gso);
  EXPECT_FALSE(r->udp.gro);
  EXPECT_EQ(r->udp.path_mode, PathMode::kDirect);
  EXPECT_NE(r->sources.find("MRC_PORT"), std::string::npos) << r->sources;
}

TEST(HostConfig, PollerProgress_OffByDefaultFileThenEnvironment) {
  auto d = parse_host_config(R"({"planes": ["::1"]})", "a.json", env_of({}));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_FALSE(d->udp.poller_progress);
  EXPECT_EQ(d->udp.poller_grace, engine::Duration{200'000});
  auto f = parse_host_config(R"({"planes": ["::1"], "poller_progress": false})", "a.json",
                             env_of({}));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_FALSE(f->udp.poller_progress);
  auto e = parse_host_config(R"({"planes": ["::1"], "poller_progress": false})", "a.json",
                             env_of({{"MRC_POLLER_PROGRESS", "1"}}));
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_TRUE(e->udp.poller_progress);
}

// The progress threads' nice value: -10 unless asked, from the file, then the environment.
TEST(HostConfig, ProgressNice_MinusTenByDefaultFileThenEnvironment) {
  auto d = parse_host_config(R"({"planes": ["::1"]})", "a.json", env_of({}));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->udp.progress_nice, -10);
  auto f = parse_host_config(R"({"planes": ["::1"], "progress_nice": -5})", "a.json", env_of({}));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->udp.progress_nice, -5);
  auto e = parse_host_config(R"({"planes": ["::1"], "progress_nice": -5})", "a.json",
                             env_of({{"MRC_PROGRESS_NICE", "3"}}));
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e->udp.progress_nice, 3);
}

TEST(HostConfig, PollerGrace_DriverDefaultFileThenEnvironmentBadNamed) {
  auto d = parse_host_config(R"({"planes": ["::1"]})", "a.json", env_of({}));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->udp.poller_grace, kDefaultPollerGrace);
  auto f = parse_host_config(R"({"planes": ["::1"], "poller_grace_us": 50})", "a.json",
                             env_of({}));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->udp.poller_grace, engine::Duration{50'000});
  auto e = parse_host_config(R"({"planes": ["::1"], "poller_grace_us": 10})", "a.json",
                             env_of({{"MRC_POLLER_GRACE_US", "2.5"}}));
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e->udp.poller_grace, engine::Duration{2'500});
  EXPECT_NE(e->sources.find("MRC_POLLER_GRACE_US"), std::string::npos) << e->sources;
  // The driver takes what the file allows (0..1 s).
  auto top = parse_host_config(R"({"planes": ["::1"], "poller_grace_us": 1000000})", "a.json",
                               env_of({}));
  ASSERT_TRUE(top.ok()) << top.error();
  EXPECT_EQ(top->udp.poller_grace, kMaxPollerGrace);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"], "poller_grace_us": 1000001})",
                                       "a.json", env_of({})))
                .find("a.json: /poller_grace_us: must be a number 0..1e+06, got 1000001"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"], "poller_grace_us": "10"})",
                                       "a.json", env_of({})))
                .find("a.json: /poller_grace_us: must be a number"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"]})", "a.json",
                                       env_of({{"MRC_POLLER_GRACE_US", "-1"}})))
                .find("MRC_POLLER_GRACE_US: must be a number 0..1e+06, got -1"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"]})", "a.json",
                                       env_of({{"MRC_POLLER_GRACE_US", "10us"}})))
                .find("MRC_POLLER_GRACE_US: must be a number 0..1e+06, got 10us"),
            std::string::npos);
}

TEST(HostConfig, ProgressThreads_AutoByDefaultFileThenEnvironmentBadNamed) {
  auto d = parse_host_config(R"({"planes": ["::1"]})", "a.json", env_of({}));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->udp.progress_threads, 0u);
  auto f = parse_host_config(R"({"planes": ["::1", "::2"], "progress_threads": 2})", "a.json",
                             env_of({}));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->udp.progress_threads, 2u);
  auto e = parse_host_config(R"({"planes": ["::1"], "progress_threads": 2})", "a.json",
                             env_of({{"MRC_PROGRESS_THREADS", "4"}}));
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e->udp.progress_threads, 4u);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"], "progress_threads": 17})", "a.json",
                                       env_of({})))
                .find("a.json: /progress_threads: must be 0..16, got 17"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"]})", "a.json",
                                       env_of({{"MRC_PROGRESS_THREADS", "two"}})))
                .find("MRC_PROGRESS_THREADS: must be 0..16, got two"),
            std::string::npos);
}

// packaging/mrc.json.example, installed as /etc/mrc/mrc.json.example (mrc-common): it parses,
// and apart from the plane addresses (which have no default) it spells the defaults, so a copy
// with this host's addresses behaves as MRC_PLANES alone would.
TEST(HostConfig, InstalledExample_ParsesToTheDefaultsButPlanes) {
  std::ifstream in(MRC_EXAMPLE_CONFIG);
  ASSERT_TRUE(in) << MRC_EXAMPLE_CONFIG;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto example = parse_host_config(text, MRC_EXAMPLE_CONFIG, env_of({}));
  ASSERT_TRUE(example.ok()) << example.error();
  auto defaults =
      parse_host_config(R"({"planes": ["fd00:0::1", "fd00:1::1"]})", "planes only", env_of({}));
  ASSERT_TRUE(defaults.ok()) << defaults.error();
  const UdpConfig& e = example->udp;
  const UdpConfig& d = defaults->udp;
  ASSERT_EQ(e.planes.size(), d.planes.size());
  for (size_t i = 0; i < e.planes.size(); ++i) {
    EXPECT_EQ(e.planes[i].address, d.planes[i].address) << i;
    EXPECT_EQ(e.planes[i].port, d.planes[i].port) << i;
  }
  EXPECT_EQ(e.path_mode, d.path_mode);
  EXPECT_EQ(e.peer_port, d.peer_port);
  EXPECT_EQ(e.ecmp_source_ports, d.ecmp_source_ports);
  EXPECT_EQ(e.peer_query, d.peer_query);
  EXPECT_EQ(e.zero_udp_checksum, d.zero_udp_checksum);
  EXPECT_EQ(e.gso, d.gso);
  EXPECT_EQ(e.gro, d.gro);
  EXPECT_EQ(e.busy_poll, d.busy_poll);
  EXPECT_EQ(e.poller_progress, d.poller_progress);
  EXPECT_EQ(e.poller_grace, d.poller_grace);
  EXPECT_EQ(e.spin, d.spin);
  EXPECT_EQ(e.netns, d.netns);
  EXPECT_EQ(e.progress_nice, d.progress_nice);
  EXPECT_EQ(e.progress_threads, d.progress_threads);
  EXPECT_EQ(e.known_peers.size(), d.known_peers.size());
  EXPECT_EQ(e.engine.nic_bps, d.engine.nic_bps);
  EXPECT_EQ(e.engine.base_rtt, d.engine.base_rtt);
  EXPECT_EQ(e.engine.min_base_rtt, d.engine.min_base_rtt);
  EXPECT_EQ(example->mtu, defaults->mtu);
}

TEST(HostConfig, PlanesSharingAnAddress_TakeConsecutivePorts) {
  auto r = parse_host_config(R"({"planes": ["::1", "::1", "fd00::1"], "port": 5000})", "t.json",
                             env_of({}));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->udp.planes[0].port, 5000);
  EXPECT_EQ(r->udp.planes[1].port, 5001);
  EXPECT_EQ(r->udp.planes[2].port, 5000);
  auto eph = parse_host_config(R"({"planes": ["::1", "::1"], "port": 0})", "t.json", env_of({}));
  ASSERT_TRUE(eph.ok());
  EXPECT_EQ(eph->udp.planes[1].port, 0) << "ephemeral stays ephemeral";
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1", "::1"], "port": 65535})", "t.json",
                                       env_of({}))).find("planes/1: port 65536 out of range"),
            std::string::npos);
}

TEST(HostConfig, MinBaseRtt_DefaultAndOverride) {
  auto r = parse_host_config(R"({"planes": ["::1"]})", "t.json", env_of({}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->udp.engine.min_base_rtt, std::chrono::microseconds(100));
  // A UdpConfig made in code (mrc-perf, C++ users of the driver) has the same floor; the
  // engine's own default stays 0 (simulated hardware fabrics).
  EXPECT_EQ(UdpConfig{}.engine.min_base_rtt, kDefaultMinBaseRtt);
  EXPECT_EQ(r->udp.engine.min_base_rtt, kDefaultMinBaseRtt);
  EXPECT_EQ(engine::EngineConfig{}.min_base_rtt, engine::Duration{0});
  r = parse_host_config(R"({"planes": ["::1"], "min_base_rtt_us": 0})", "t.json",
                        env_of({{"MRC_MIN_BASE_RTT_US", "40"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->udp.engine.min_base_rtt, std::chrono::microseconds(40));
}

TEST(HostConfig, Numbers_OutOfRangeNamedNotConverted) {
  // Found by fuzz_config: a huge base_rtt_us overflowed the conversion to nanoseconds.
  const Getenv none = env_of({});
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"], "base_rtt_us": 1e26})", "a.json", none))
                .find("a.json: /base_rtt_us: must be a number 0..1e+07, got 1e+26"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"], "nic_gbps": 1e300})", "a.json", none))
                .find("/nic_gbps: must be a number 0..100000"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"]})", "a.json",
                                       env_of({{"MRC_MIN_BASE_RTT_US", "inf"}})))
                .find("MRC_MIN_BASE_RTT_US: must be a number 0..1e+07, got inf"),
            std::string::npos);
  auto r = parse_host_config(R"({"planes": ["::1"], "base_rtt_us": 1e7, "nic_gbps": 400})", "a.json",
                             none);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->udp.engine.base_rtt, std::chrono::seconds(10));
  EXPECT_EQ(r->udp.engine.nic_bps, 400'000'000'000ULL);
}

TEST(HostConfig, Parse_ErrorsNameTheField) {
  const Getenv none = env_of({});
  EXPECT_NE(error_of(parse_host_config(R"({"prot": 1})", "a.json", none)).find("a.json: /prot: unknown field"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["fd00::zz"]})", "a.json", none))
                .find("planes/0: not an IPv6 or IPv4 address: fd00::zz"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"]})", "a.json",
                                       env_of({{"MRC_PORT", "70000"}})))
                .find("MRC_PORT: must be 0..65535, got 70000"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"], "mtu": 1000})", "a.json", none)).find("mtu"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"], "path_mode": "spray"})", "a.json", none)).find("path_mode"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"], "path_mode": "srv6"})", "a.json", none)).find("needs both fabric and host"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config("{", "a.json", none)).find("a.json: not JSON"), std::string::npos);
  EXPECT_NE(error_of(parse_host_config("{}", "a.json", none)).find("planes: no local addresses"),
            std::string::npos);
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["::1"]})", "a.json", env_of({{"MRC_GSO", "maybe"}}))).find("MRC_GSO"),
            std::string::npos);
}

TEST(HostConfig, Load_Srv6FromFabricFileDerivesPlanes) {
  auto fab = srv6::Fabric::make({.hosts = 4, .planes = 2, .spines = 2, .hosts_per_t0 = 2,
                                 .host_port_gbps = 2});
  ASSERT_TRUE(fab.ok());
  const std::string path = temp_file(srv6::dump(*fab));
  const std::string cfg_path =
      temp_file(R"({"path_mode": "srv6", "fabric": ")" + path + R"(", "host": 3})");

  auto r = load_host_config(env_of({{"MRC_CONFIG", cfg_path}}));
  std::remove(path.c_str());
  std::remove(cfg_path.c_str());
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->udp.planes.size(), 2u);
  EXPECT_EQ(r->udp.planes[1].address, srv6::format(fab->host_address(3, 1)));
  EXPECT_EQ(r->udp.path_mode, PathMode::kSrv6);
  EXPECT_EQ(r->udp.local_host, 3u);
  EXPECT_EQ(r->udp.engine.nic_bps, 4'000'000'000u);  // 2 planes x 2 Gbit/s

  auto missing = load_host_config(env_of({{"MRC_CONFIG", "/nonexistent/mrc.json"}}));
  EXPECT_NE(error_of(missing).find("MRC_CONFIG: cannot read /nonexistent/mrc.json"), std::string::npos);
}

TEST(HostConfig, FabricFile_Over16MiBRefusedNamingTheFile) {
  const std::string fabric = temp_file(std::string((16u << 20) + 1, ' '));
  const std::string cfg =
      temp_file(R"({"path_mode": "srv6", "fabric": ")" + fabric + R"(", "host": 0})");
  auto r = load_host_config(env_of({{"MRC_CONFIG", cfg}}));
  std::remove(fabric.c_str());
  std::remove(cfg.c_str());
  EXPECT_NE(error_of(r).find(fabric + ": larger than 16 MiB"), std::string::npos) << error_of(r);
}

std::string text_of(const sockaddr_in6& a) {
  char s[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, &a.sin6_addr, s, sizeof s);
  return std::string(s) + "/" + std::to_string(ntohs(a.sin6_port));
}

TEST(HostConfig, Peers_TableOfPlaneAddressesAtEachPlanesPort) {
  auto r = parse_host_config(
      R"({"path_mode": "ecmp", "planes": ["2001:db8:0:1::1", "2001:db8:1:1::1"], "port": 5000,
          "peers": [{"planes": ["2001:db8:0:2::1", "2001:db8:1:2::1"]},
                    {"planes": ["2001:db8:0:3::1", "2001:db8:1:3::1"]}]})",
      "t.json", env_of({}));
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->udp.known_peers.size(), 2u);
  ASSERT_EQ(r->udp.known_peers[1].size(), 2u);
  EXPECT_EQ(text_of(r->udp.known_peers[0][0]), "2001:db8:0:2::1/5000");
  EXPECT_EQ(text_of(r->udp.known_peers[1][1]), "2001:db8:1:3::1/5000");
  EXPECT_TRUE(r->udp.peer_query);
  // The environment replaces the file's table: hosts by ';', planes by ','.
  r = parse_host_config(
      R"({"planes": ["2001:db8::1", "2001:db8:1::1"], "peers": []})", "t.json",
      env_of({{"MRC_PEERS", "2001:db8::2,2001:db8:1::2;2001:db8::3,2001:db8:1::3"},
              {"MRC_PEER_QUERY", "0"}}));
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->udp.known_peers.size(), 2u);
  EXPECT_EQ(text_of(r->udp.known_peers[1][0]), "2001:db8::3/4791");
  EXPECT_FALSE(r->udp.peer_query);
}

TEST(HostConfig, Peers_ErrorsNameTheField) {
  auto err = [](const std::string& json, std::map<std::string, std::string> env = {}) {
    return error_of(parse_host_config(json, "t.json", env_of(std::move(env))));
  };
  const std::string planes = R"("planes": ["2001:db8::1", "198.18.1.1"])";
  struct Case {
    std::string json;
    std::string want;
  } cases[] = {
      {"{" + planes + R"(, "peers": {"planes": []}})", "t.json: /peers: must be an array"},
      {"{" + planes + R"(, "peers": ["2001:db8::2"]})", "t.json: /peers/0: must be an object"},
      {"{" + planes + R"(, "peers": [{"plane": ["2001:db8::2"]}]})",
       "t.json: /peers/0/plane: unknown field"},
      {"{" + planes + R"(, "peers": [{}]})", "t.json: /peers/0: needs \"planes\""},
      {"{" + planes + R"(, "peers": [{"planes": []}]})",
       "t.json: /peers/0/planes: must be a non-empty array"},
      {"{" + planes + R"(, "peers": [{"planes": ["2001:db8::2", 7]}]})",
       "t.json: /peers/0/planes/1: must be a string"},
      {"{" + planes + R"(, "peers": [{"planes": ["2001:db8::2"]}]})",
       "t.json: /peers/0/planes: 1 addresses for 2 planes"},
      {"{" + planes + R"(, "peers": [{"planes": ["2001:db8::2", "198.18.1.zz"]}]})",
       "t.json: /peers/0/planes/1: not an IPv6 or IPv4 address: 198.18.1.zz"},
      {"{" + planes + R"(, "peers": [{"planes": ["198.18.0.2", "198.18.1.2"]}]})",
       "t.json: /peers/0/planes/0: 198.18.0.2 is IPv4, plane 0 here is IPv6"},
      {"{" + planes + R"(, "peers": [{"planes": ["2001:db8::2", "198.18.1.2"]},
                                     {"planes": ["2001:db8::3", "198.18.1.2"]}]})",
       "t.json: /peers/1/planes/1: 198.18.1.2 is listed already (t.json: /peers/0/planes/1)"},
      {"{" + planes + R"(, "peer_query": 1})", "t.json: /peer_query: must be true or false"},
  };
  for (const Case& c : cases)
    EXPECT_NE(err(c.json).find(c.want), std::string::npos) << c.json << "\n-> " << err(c.json);
  EXPECT_NE(err("{" + planes + "}", {{"MRC_PEERS", "2001:db8::2"}})
                .find("MRC_PEERS/0/planes: 1 addresses for 2 planes"),
            std::string::npos);
}

TEST(HostConfig, Ipv4Planes_BoundAsIpv4Mapped) {
  auto r = parse_host_config(R"({"path_mode": "ecmp", "planes": ["198.18.0.1", "198.18.1.1"]})",
                             "t.json", env_of({}));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->udp.planes[0].address, "::ffff:198.18.0.1");
  EXPECT_EQ(r->udp.planes[1].address, "::ffff:198.18.1.1");
  EXPECT_EQ(r->udp.planes[1].port, 4791);
  r = parse_host_config(R"({"planes": ["::ffff:198.18.0.1"]})", "t.json", env_of({}));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->udp.planes[0].address, "::ffff:198.18.0.1") << "the mapped form is taken as is";
  EXPECT_NE(error_of(parse_host_config(R"({"planes": ["198.18.0.256"]})", "t.json", env_of({})))
                .find("planes/0: not an IPv6 or IPv4 address: 198.18.0.256"),
            std::string::npos);
}

}  // namespace
}  // namespace mrc::io

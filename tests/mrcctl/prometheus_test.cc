// `mrcctl metrics --listen` scraped by a real Prometheus server (Debian's prometheus): a
// temporary configuration with one target, prometheus a child process with its own storage
// directory and a free port; the target comes up, every family docs/mrcctl.md names is in
// Prometheus's database, a query gives what the engine counted, and `promtool check metrics`
// finds nothing to fix in the scraped text. Skips, saying why, where prometheus or promtool is
// not installed. Ends only the processes it started, by pid.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "loopback_pair.h"
#include "run_cli.h"

namespace mrc::mrcctl {
namespace {

using namespace mrc::mrcctl::testing;
using namespace std::chrono_literals;

/// The loopback address (::1 or 127.0.0.1) at `port`, and its length.
sockaddr_storage loopback(bool v6, uint16_t port, socklen_t* len) {
  sockaddr_storage a{};
  *len = v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (v6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&a);
    a6->sin6_family = AF_INET6;
    a6->sin6_addr = in6addr_loopback;
    a6->sin6_port = htons(port);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&a);
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a4->sin_port = htons(port);
  }
  return a;
}

/// A TCP port nothing listens on now (bound to port 0 and released).
uint16_t free_port(bool v6) {
  const int s = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = 0;
  sockaddr_storage a = loopback(v6, 0, &len);
  uint16_t port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&a)->sin6_port
                    : reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  ::close(s);
  return port;
}

/// GET `path` over HTTP/1.0 from a loopback port; the body, or "" when nothing answered.
std::string http_get(bool v6, uint16_t port, const std::string& path) {
  const int s = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = 0;
  sockaddr_storage a = loopback(v6, port, &len);
  std::string reply;
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), len) == 0) {
    const std::string rq = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    (void)!::send(s, rq.data(), rq.size(), MSG_NOSIGNAL);
    char buf[65536];
    ssize_t n;
    while ((n = ::recv(s, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
  }
  ::close(s);
  const size_t body = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.", 0) != 0 || reply.find(" 200 ") > reply.find("\r\n") ||
      body == std::string::npos)
    return "";
  return reply.substr(body + 4);
}

/// Family names in docs/mrcctl.md's metrics table, `{a,b}` expanded; names with a `<...>`
/// placeholder (one per counter of a struct) are left out: the test names examples of those.
std::set<std::string> documented_families() {
  std::ifstream f(MRC_DOCS_DIR "/mrcctl.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const size_t start = doc.find("| family | type | labels |");
  std::set<std::string> out;
  if (start == std::string::npos) return out;
  std::istringstream lines(doc.substr(start));
  std::string line;
  std::getline(lines, line);
  std::getline(lines, line);  // | --- |
  static const std::regex kName("`(mrc_[^`]+)`");
  while (std::getline(lines, line) && line.rfind("|", 0) == 0) {
    const std::string first = line.substr(0, line.find('|', 1));
    for (auto it = std::sregex_iterator(first.begin(), first.end(), kName);
         it != std::sregex_iterator(); ++it) {
      std::vector<std::string> names = {(*it)[1]};
      for (bool more = true; more;) {
        more = false;
        std::vector<std::string> next;
        for (const auto& n : names) {
          const size_t a = n.find('{'), b = n.find('}');
          if (a == std::string::npos || b == std::string::npos) {
            next.push_back(n);
            continue;
          }
          more = true;
          std::stringstream alts(n.substr(a + 1, b - a - 1));
          std::string alt;
          while (std::getline(alts, alt, ','))
            next.push_back(n.substr(0, a) + alt + n.substr(b + 1));
        }
        names = std::move(next);
      }
      for (const auto& n : names)
        if (n.find('<') == std::string::npos) out.insert(n);
    }
  }
  return out;
}

class Prometheus : public mrc::observe::testing::LoopbackPair {
 protected:
  void SetUp() override {
    prometheus_ = find_program("prometheus");
    promtool_ = find_program("promtool");
    if (prometheus_.empty() || promtool_.empty())
      GTEST_SKIP() << "prometheus / promtool not installed (scripts/deps.sh)";
    LoopbackPair::SetUp();
    dir_ =
        std::filesystem::temp_directory_path() / ("mrc-prometheus-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t pid : children_) {
      ::kill(pid, SIGTERM);
      int status = 0;
      for (int i = 0; i < 100 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(50ms);
      if (::waitpid(pid, &status, WNOHANG) == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
      }
    }
    for (int fd : fds_) ::close(fd);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
    if (!prometheus_.empty() && !promtool_.empty()) LoopbackPair::TearDown();
  }
  /// `sh -c 'exec <cmd> > log 2>&1'`: the child is the program itself (same pid), its output
  /// in a file that cannot fill up a pipe.
  pid_t start(const std::string& cmd, const std::string& log) {
    int o = -1, e = -1;
    const pid_t pid =
        spawn_program("/bin/sh", {"-c", "exec " + cmd + " >" + log + " 2>&1"}, &o, &e);
    if (pid > 0) {
      children_.push_back(pid);
      fds_.push_back(o);
      fds_.push_back(e);
    }
    return pid;
  }
  std::string log_of(const std::string& name) {
    std::ifstream f(dir_ / name);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  std::string prometheus_, promtool_;
  std::filesystem::path dir_;
  std::vector<pid_t> children_;
  std::vector<int> fds_;
};

TEST_F(Prometheus, MetricsListen_ScrapedTargetUpSeriesThereLintClean) {
  pump(200ms);
  std::this_thread::sleep_for(50ms);
  const uint16_t mport = free_port(true), pport = free_port(false);
  ASSERT_NE(mport, 0);
  ASSERT_NE(pport, 0);
  const std::string pid = std::to_string(::getpid());
  ASSERT_GT(start(std::string(MRCCTL_PATH) + " --pid " + pid +
                      " metrics --listen '[::1]:" + std::to_string(mport) + "'",
                  (dir_ / "mrcctl.log").string()),
            0);
  const std::string target = "[::1]:" + std::to_string(mport);
  std::ofstream(dir_ / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\n"
      << "scrape_configs:\n  - job_name: mrc\n"
      << "    static_configs:\n      - targets: ['" << target << "']\n";
  ASSERT_GT(start(prometheus_ + " --config.file=" + (dir_ / "prometheus.yml").string() +
                      " --storage.tsdb.path=" + (dir_ / "data").string() +
                      " --web.listen-address=127.0.0.1:" + std::to_string(pport),
                  (dir_ / "prometheus.log").string()),
            0);

  // The target is up once a scrape has succeeded.
  std::string health, last_error;
  for (int i = 0; i < 300 && health != "up"; ++i) {
    std::this_thread::sleep_for(100ms);
    if (i % 5 == 0) pump(20ms);  // keep the counters moving
    const auto j = nlohmann::json::parse(http_get(false, pport, "/api/v1/targets"), nullptr, false);
    if (j.is_discarded() || !j.contains("data")) continue;
    for (const auto& t : j["data"]["activeTargets"]) {
      if (t["labels"]["instance"] != target) continue;
      health = t["health"].get<std::string>();
      last_error = t["lastError"].get<std::string>();
    }
  }
  ASSERT_EQ(health, "up") << "target " << target << ": " << last_error << "\n"
                          << log_of("prometheus.log") << log_of("mrcctl.log");

  // Every documented family is in Prometheus's database (a scrape that stored them).
  auto names_json = nlohmann::json::parse(http_get(false, pport, "/api/v1/label/__name__/values"),
                                          nullptr, false);
  ASSERT_FALSE(names_json.is_discarded());
  std::set<std::string> stored;
  for (const auto& n : names_json["data"]) stored.insert(n.get<std::string>());
  std::set<std::string> want = documented_families();
  ASSERT_GT(want.size(), 20u) << "docs/mrcctl.md's metrics table not found or changed shape";
  // Written only for EVs whose state changed: none does on a clean loopback pair.
  want.erase("mrc_path_state_change_timestamp_seconds");
  // Examples of the per-counter families (`mrc_udp_<counter>_total`, `mrc_qp_<counter>_total`).
  for (const char* n :
       {"mrc_udp_datagrams_sent_total", "mrc_udp_sent_bytes_total", "mrc_udp_received_bytes_total",
        "mrc_qp_tx_data_packets_total", "mrc_qp_tx_payload_bytes_total", "mrc_qp_rx_acks_total"})
    want.insert(n);
  for (const auto& n : want) EXPECT_TRUE(stored.count(n)) << n << " is not in Prometheus";

  // A query gives the engine's counters: both QPs sent payload; the scrape itself is up.
  auto q = nlohmann::json::parse(
      http_get(false, pport, "/api/v1/query?query=mrc_qp_tx_payload_bytes_total"), nullptr, false);
  ASSERT_FALSE(q.is_discarded());
  ASSERT_EQ(q["status"], "success") << q.dump();
  EXPECT_EQ(q["data"]["result"].size(), 2u) << q.dump();
  double payload = 0;
  for (const auto& r : q["data"]["result"]) {
    EXPECT_EQ(r["metric"]["pid"], pid);
    EXPECT_EQ(r["metric"]["job"], "mrc");
    payload += std::stod(r["value"][1].get<std::string>());
  }
  EXPECT_GE(payload, static_cast<double>(completed_) * (256u << 10) / 2);
  q = nlohmann::json::parse(http_get(false, pport, "/api/v1/query?query=up%7Bjob%3D%22mrc%22%7D"),
                            nullptr, false);
  ASSERT_FALSE(q.is_discarded());
  ASSERT_EQ(q["data"]["result"].size(), 1u) << q.dump();
  EXPECT_EQ(q["data"]["result"][0]["value"][1], "1");

  // promtool's linter on what the scraper read.
  const std::string text = http_get(true, mport, "/metrics");
  ASSERT_FALSE(text.empty());
  std::ofstream(dir_ / "metrics.txt") << text;
  const auto lint = run_program(
      "/bin/sh", {"-c", promtool_ + " check metrics < " + (dir_ / "metrics.txt").string()});
  EXPECT_EQ(lint.rc, 0) << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "") << "promtool check metrics found problems";
}

}  // namespace
}  // namespace mrc::mrcctl

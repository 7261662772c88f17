// Multicast member records: text form, parsing, liveness (mcast_record.h).
#include "verbs/mcast_record.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

#include "mrc/io/udp/link_mtu.h"

namespace mrc::verbs {

namespace {

constexpr std::string_view kHeader = "mrc-mcast-member 2";

// "[addr]:port", as parse_addr reads it.
std::string addr_text(const sockaddr_in6& a) {
  return "[" + io::address_text(a) + "]:" + std::to_string(ntohs(a.sin6_port));
}

bool parse_int(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;  // fits int64_t
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// "[addr]:port" -> a sockaddr_in6 (scope id 0: records name routable addresses).
bool parse_addr(std::string_view s, sockaddr_in6* out) {
  const size_t close = s.find("]:");
  if (s.size() < 5 || s[0] != '[' || close == std::string_view::npos) return false;
  const std::string host(s.substr(1, close - 1));
  int64_t port = 0;
  if (!parse_int(s.substr(close + 2), &port) || port == 0 || port > 65535) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET6, host.c_str(), &a.sin6_addr) != 1) return false;
  *out = a;
  return true;
}

}  // namespace

std::string encode_mcast_record(const McastRecord& r) {
  char gid[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, r.gid.raw, gid, sizeof gid);
  std::string s(kHeader);
  s += "\nhost " + r.host;
  if (!r.node.empty()) s += "\nnode " + r.node;
  s += "\npid " + std::to_string(r.pid);
  s += "\nexpires " + std::to_string(r.expires_ms);
  s += "\ngid " + std::string(gid);
  for (const sockaddr_in6& a : r.planes) s += "\nplane " + addr_text(a);
  s += "\n";
  return s;
}

Result<McastRecord, std::string> parse_mcast_record(std::string_view text) {
  using R = Result<McastRecord, std::string>;
  const size_t eol = text.find('\n');
  const std::string_view first = text.substr(0, eol);
  if (first != kHeader) {
    if (first.rfind("mrc-mcast-member ", 0) == 0)
      return R(Err(std::string("a record of another version (\"") + std::string(first) +
                   "\"; this MRC reads \"" + std::string(kHeader) + "\")"));
    return R(
        Err(std::string("not a member record (no \"") + std::string(kHeader) + "\" line first)"));
  }
  McastRecord r;
  bool has_pid = false, has_expires = false, has_gid = false;
  size_t pos = eol == std::string_view::npos ? text.size() : eol + 1;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    const std::string_view key = line.substr(0, sp);
    const std::string_view value = sp == std::string_view::npos ? "" : line.substr(sp + 1);
    auto bad = [&](const char* what) {
      return R(Err(std::string("bad ") + std::string(key) + " line \"" + std::string(line) +
                   "\": " + what));
    };
    if (key == "host") {
      if (!valid_mcast_host_id(value)) return bad("1..128 characters of [A-Za-z0-9._-]");
      r.host = value;
    } else if (key == "node") {
      r.node = value;
    } else if (key == "pid") {
      if (!parse_int(value, &r.pid) || r.pid <= 0) return bad("a positive number");
      has_pid = true;
    } else if (key == "expires") {
      if (!parse_int(value, &r.expires_ms)) return bad("unix time in ms");
      has_expires = true;
    } else if (key == "gid") {
      const std::string g(value);
      if (::inet_pton(AF_INET6, g.c_str(), r.gid.raw) != 1) return bad("an IPv6 address");
      has_gid = true;
    } else if (key == "plane") {
      sockaddr_in6 a{};
      if (!parse_addr(value, &a)) return bad("[IPv6 address]:port");
      r.planes.push_back(a);
    }  // other keys: a later version's, ignored
  }
  if (r.host.empty()) return R(Err(std::string("no host line")));
  if (!has_pid) return R(Err(std::string("no pid line")));
  if (!has_expires) return R(Err(std::string("no expires line")));
  if (!has_gid) return R(Err(std::string("no gid line")));
  if (r.planes.empty()) return R(Err(std::string("no plane line")));
  return R(std::move(r));
}

std::string mcast_record_name(const McastRecord& r) {
  const uint16_t port = r.planes.empty() ? 0 : ntohs(r.planes[0].sin6_port);
  return r.host + "." + std::to_string(r.pid) + "." + std::to_string(port);
}

bool valid_mcast_host_id(std::string_view host) {
  if (host.empty() || host.size() > 128) return false;
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

McastLiveness mcast_record_liveness(const McastRecord& r, std::string_view self_host,
                                    int64_t now_ms, bool (*alive)(int64_t pid)) {
  if (now_ms >= r.expires_ms) return McastLiveness::kStale;
  if (r.host == self_host && !alive(r.pid)) return McastLiveness::kStale;
  return McastLiveness::kLive;
}

}  // namespace mrc::verbs

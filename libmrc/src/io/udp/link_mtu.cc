#include "mrc/io/udp/link_mtu.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "mrc/wire/wire.h"

namespace mrc::io {
namespace {

Result<uint32_t, std::string> mtu_of(const char* ifname) {
  const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Err(std::string("socket: ") + std::strerror(errno));
  ifreq r{};
  std::strncpy(r.ifr_name, ifname, IFNAMSIZ - 1);
  const int rc = ::ioctl(fd, SIOCGIFMTU, &r);
  const int e = errno;
  ::close(fd);
  if (rc != 0) return Err(std::string("SIOCGIFMTU ") + ifname + ": " + std::strerror(e));
  return static_cast<uint32_t>(r.ifr_mtu);
}

bool same_address(const sockaddr* ifa, const sockaddr_in6& local) {
  if (ifa->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(ifa)->sin6_addr, &local.sin6_addr,
                       sizeof(in6_addr)) == 0;
  }
  if (ifa->sa_family == AF_INET && IN6_IS_ADDR_V4MAPPED(&local.sin6_addr)) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in*>(ifa)->sin_addr,
                       &local.sin6_addr.s6_addr[12], 4) == 0;
  }
  return false;
}

bool loopback_address(const sockaddr_in6& a) {
  return IN6_IS_ADDR_LOOPBACK(&a.sin6_addr) ||
         (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr) && a.sin6_addr.s6_addr[12] == 127);
}

bool wildcard(const sockaddr_in6& a) {
  static const uint8_t v4_any[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0};
  return IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr) || std::memcmp(&a.sin6_addr, v4_any, 16) == 0;
}

}  // namespace

std::string address_text(const sockaddr_in6& a) {
  char s[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET6, &a.sin6_addr, s, sizeof s);
  return s;
}

uint32_t payload_overhead(bool ipv4) {
  return (ipv4 ? 20 : 40) + 8 + static_cast<uint32_t>(wire::kDataHeaderSize);
}

uint32_t payload_for_link(uint32_t link_mtu, bool ipv4) {
  const uint32_t over = payload_overhead(ipv4);
  if (link_mtu < over + 256) return 0;
  uint32_t p = wire::kMaxPayload;
  while (p > link_mtu - over) p /= 2;
  return p;
}

Result<uint32_t, std::string> link_mtu(const sockaddr_in6& local) {
  if (!wildcard(local)) {
    auto name = link_interface(local);
    if (!name.ok()) return Err(name.error());
    return mtu_of(name->c_str());
  }
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0)
    return Err(address_text(local) + ": getifaddrs: " + std::strerror(errno));
  uint32_t smallest = 0, loopback = 0;
  for (ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
    auto m = mtu_of(i->ifa_name);
    if (!m.ok()) continue;
    if (i->ifa_flags & IFF_LOOPBACK)
      loopback = *m;
    else if (smallest == 0 || *m < smallest)
      smallest = *m;
  }
  ::freeifaddrs(all);
  if (smallest == 0 && loopback == 0) return Err(address_text(local) + ": no interface is up");
  return smallest != 0 ? smallest : loopback;
}

Result<std::string, std::string> link_interface(const sockaddr_in6& local) {
  if (wildcard(local))
    return Err(address_text(local) + ": a wildcard address is on no one interface");
  if (local.sin6_scope_id != 0) {
    char name[IF_NAMESIZE] = {};
    if (::if_indextoname(local.sin6_scope_id, name) == nullptr)
      return Err(address_text(local) + ": no interface with index " +
                 std::to_string(local.sin6_scope_id));
    return std::string(name);
  }
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0)
    return Err(address_text(local) + ": getifaddrs: " + std::strerror(errno));
  std::string found, lo_name;
  for (ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) && lo_name.empty()) lo_name = i->ifa_name;
    if (same_address(i->ifa_addr, local)) {
      found = i->ifa_name;
      break;
    }
  }
  ::freeifaddrs(all);
  // 127.0.0.0/8 is the loopback's without being on it address by address.
  if (found.empty() && loopback_address(local)) found = lo_name;
  if (found.empty()) return Err(address_text(local) + ": no interface holds this address");
  return found;
}

}  // namespace mrc::io

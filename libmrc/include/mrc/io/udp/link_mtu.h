// The payload a plane's link carries: the MTU of the interface a plane socket is bound to, and
// the largest MRC payload (QpAttr::mtu) that fits in it with the headers.
// Threading: free functions; link_mtu reads the current network namespace (call it where the
// socket lives, as UdpDriver::create does inside UdpConfig::netns).
//
// A data packet on the wire is payload + 72 bytes of MRC data header + 8 of UDP + 40 of IPv6
// (20 of IPv4). The payload MRC uses is the largest power of two that fits:
//   link MTU 9000 (jumbo) -> 8192    link MTU 1500 (Ethernet default) -> 1024
//   link MTU 4200 -> 2048            loopback (65536) -> 8192 (wire::kMaxPayload)
// A payload larger than the link would be fragmented by the sending host: every fragment a
// loss point for the whole packet, and a trimming switch cannot cut a fragment to its header.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

#include "mrc/common/result.h"

namespace mrc::io {

/// `a`'s address as text (IPv6 literal, IPv4-mapped as ::ffff:a.b.c.d), for messages.
std::string address_text(const sockaddr_in6& a);

/// IP + UDP + MRC data header bytes around a payload: 120 (IPv6), 100 (IPv4).
uint32_t payload_overhead(bool ipv4);

/// Largest power-of-two payload, 256 .. wire::kMaxPayload, that `link_mtu` carries; 0 when
/// not even 256 fits.
uint32_t payload_for_link(uint32_t link_mtu, bool ipv4);

/// MTU of the interface holding `local` (its address, IPv4-mapped for IPv4 planes; a scope id
/// names the interface of a link-local one; any loopback address is the loopback's). A wildcard address (:: or 0.0.0.0) may send on
/// any interface: the smallest MTU of the interfaces that are up (loopback only when nothing
/// else is). Errors name the address.
Result<uint32_t, std::string> link_mtu(const sockaddr_in6& local);

/// Name of the one interface holding `local` (as link_mtu finds it: a scope id names it, any
/// loopback address is the loopback's). Errors: a wildcard address (no one interface), no
/// interface holds it.
Result<std::string, std::string> link_interface(const sockaddr_in6& local);

}  // namespace mrc::io

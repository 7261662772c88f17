#include "mrc/io/udp/peer_addresses.h"

#include <sys/random.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace mrc::io {

namespace {

uint32_t random_nonce() {
  uint32_t t = 0;
  if (::getrandom(&t, sizeof t, 0) != sizeof t) t = static_cast<uint32_t>(std::rand());
  return t;
}

}  // namespace

bool PeerAddresses::start(engine::Time now, engine::PeerId peer, std::vector<sockaddr_in6> known,
                          const Binding& b) {
  if (known.empty()) return false;
  auto it = peers_.find(peer);
  if (it != peers_.end() && it->second.state != Learning::State::kGaveUp) return false;
  Learning l;
  l.known = std::move(known);
  l.b = b;
  l.nonce = random_nonce();
  l.next = now;
  peers_[peer] = l;
  return true;
}

std::vector<PeerAddresses::Query> PeerAddresses::due(engine::Time now, uint64_t* gave_up) {
  std::vector<Query> out;
  for (auto& [peer, l] : peers_) {
    if (l.state != Learning::State::kAsking || l.next > now) continue;
    if (l.sent >= kTries) {
      l.state = Learning::State::kGaveUp;
      ++*gave_up;
      continue;
    }
    wire::Packet p;
    p.common.kind = wire::Kind::kAddrQuery;
    p.common.dst_qpn = 0;
    p.common.token = l.b.remote_token;
    p.common.psn = l.nonce;
    p.common.ts = static_cast<uint64_t>(now.count());
    p.addr.target_qpn = l.b.dest_qpn;
    p.addr.src_qpn = l.b.qpn;
    Query q;
    q.peer = peer;
    q.plane = static_cast<uint16_t>(l.sent % l.known.size());
    q.to = l.known[q.plane];
    wire::encode_header(p, {}, q.bytes);
    out.push_back(q);
    l.next = now + kFirstRetry * (int64_t{1} << l.sent);
    ++l.sent;
  }
  return out;
}

engine::Time PeerAddresses::next_deadline() const {
  engine::Time t = engine::kNever;
  for (const auto& [peer, l] : peers_)
    if (l.state == Learning::State::kAsking) t = std::min(t, l.next);
  return t;
}

std::optional<PeerAddresses::Learned> PeerAddresses::on_reply(const wire::Packet& r,
                                                              const sockaddr_in6& from) {
  if (r.common.kind != wire::Kind::kAddrReply) return std::nullopt;
  for (auto& [peer, l] : peers_) {
    if (l.state != Learning::State::kAsking || l.sent == 0) continue;
    if (r.common.psn != l.nonce || r.common.token != l.b.local_token ||
        r.addr.target_qpn != l.b.qpn || r.addr.src_qpn != l.b.dest_qpn)
      continue;
    const bool from_known = std::any_of(l.known.begin(), l.known.end(), [&](const sockaddr_in6& k) {
      return std::memcmp(&from.sin6_addr, &k.sin6_addr, sizeof k.sin6_addr) == 0 &&
             from.sin6_port == k.sin6_port;
    });
    if (!from_known) continue;
    l.state = Learning::State::kLearned;
    Learned out;
    out.peer = peer;
    const size_t n = std::min<size_t>(r.addr.planes, wire::kMaxAddrPlanes);
    out.planes.assign(r.addr.plane.begin(), r.addr.plane.begin() + static_cast<ptrdiff_t>(n));
    return out;
  }
  return std::nullopt;
}

bool PeerAddresses::learned(engine::PeerId peer) const {
  auto it = peers_.find(peer);
  return it != peers_.end() && it->second.state == Learning::State::kLearned;
}

bool PeerAddresses::matches(const wire::Packet& q, const engine::QpAttr& qp) {
  const bool connected = engine::connected_in(qp.state);
  return q.common.kind == wire::Kind::kAddrQuery && connected && qp.local_token != 0 &&
         q.common.token == qp.local_token && q.addr.src_qpn == qp.dest_qpn;
}

bool PeerAddresses::may_answer(engine::Time now) {
  const double add = std::chrono::duration<double>(now - budget_at_).count() * kAnswersPerSecond;
  budget_ = std::min<double>(kAnswerBurst, budget_ + std::max(add, 0.0));
  budget_at_ = now;
  if (budget_ < 1) return false;
  budget_ -= 1;
  return true;
}

size_t PeerAddresses::build_reply(engine::Time now, const wire::Packet& q, const engine::QpAttr& qp,
                                  engine::Qpn qpn, std::span<const sockaddr_in6> planes,
                                  std::span<uint8_t> out) {
  wire::Packet a;
  a.common.kind = wire::Kind::kAddrReply;
  a.common.dst_qpn = 0;
  a.common.token = qp.remote_token;
  a.common.psn = q.common.psn;
  a.common.ts = static_cast<uint64_t>(now.count());
  a.addr.target_qpn = q.addr.src_qpn;
  a.addr.src_qpn = qpn;
  a.addr.planes = static_cast<uint8_t>(std::min(planes.size(), wire::kMaxAddrPlanes));
  for (size_t i = 0; i < a.addr.planes; ++i) {
    std::memcpy(a.addr.plane[i].addr.data(), &planes[i].sin6_addr, 16);
    a.addr.plane[i].port = ntohs(planes[i].sin6_port);
  }
  return wire::encode_header(a, {}, out);
}

}  // namespace mrc::io

#include "mrc/io/udp/port_status.h"

namespace mrc::io {

size_t PortStatusUpdates::build_update(engine::Time now, engine::Qpn qpn, const engine::QpAttr& qp,
                                       uint32_t ports_up, uint32_t seq, std::span<uint8_t> out) {
  wire::Packet p;
  p.common.kind = wire::Kind::kPortStatus;
  p.common.dst_qpn = 0;
  p.common.token = qp.remote_token;
  p.common.psn = seq;
  p.common.ts = static_cast<uint64_t>(now.count());
  p.port_status.target_qpn = qp.dest_qpn;
  p.port_status.src_qpn = qpn;
  p.port_status.ports_up = ports_up;
  if (open_.size() >= kMaxOpen) open_.erase(open_.begin());
  open_[seq] = Open{qpn, qp.local_token, now};
  return wire::encode_header(p, {}, out);
}

bool PortStatusUpdates::on_ack(engine::Time now, const wire::Packet& ack, uint16_t plane) {
  const auto it = open_.find(ack.common.psn);
  if (ack.common.kind != wire::Kind::kPortStatusAck || it == open_.end() || it->second.token == 0 ||
      ack.common.token != it->second.token || ack.port_status.target_qpn != it->second.qpn)
    return false;
  acked_.push_back(Ack{ack.common.psn, plane, now - it->second.sent});
  open_.erase(it);
  return true;
}

std::vector<PortStatusUpdates::Ack> PortStatusUpdates::take() {
  std::vector<Ack> out;
  out.swap(acked_);
  return out;
}

bool PortStatusUpdates::bound(const wire::Packet& u, const engine::QpAttr& qp) {
  return u.common.kind == wire::Kind::kPortStatus && engine::connected_in(qp.state) &&
         qp.local_token != 0 && u.common.token == qp.local_token &&
         u.port_status.src_qpn == qp.dest_qpn;
}

bool PortStatusUpdates::fresh(engine::PeerId peer, const wire::Packet& u) {
  const Applied now{u.common.psn, u.port_status.src_qpn, u.common.token};
  const auto [it, first] = applied_.try_emplace(peer, now);
  if (first) return true;
  Applied& last = it->second;
  const bool same_pair = last.src_qpn == now.src_qpn && last.token == now.token;
  if (same_pair && static_cast<int32_t>(now.seq - last.seq) <= 0) return false;
  last = now;
  return true;
}

size_t PortStatusUpdates::build_ack(engine::Time now, const wire::Packet& update,
                                    const engine::QpAttr& qp, engine::Qpn qpn,
                                    std::span<uint8_t> out) {
  wire::Packet p;
  p.common.kind = wire::Kind::kPortStatusAck;
  p.common.dst_qpn = 0;
  p.common.token = qp.remote_token;
  p.common.psn = update.common.psn;
  p.common.ev = update.common.ev;
  p.common.ts = static_cast<uint64_t>(now.count());
  p.port_status.target_qpn = update.port_status.src_qpn;
  p.port_status.src_qpn = qpn;
  p.port_status.ports_up = update.port_status.ports_up;
  return wire::encode_header(p, {}, out);
}

}  // namespace mrc::io

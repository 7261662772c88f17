#include "mrc/io/udp/probes.h"

#include <sys/random.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace mrc::io {

uint32_t Probes::open() {
  uint32_t t = 0;
  while (t == 0 || sessions_.count(t)) {
    if (::getrandom(&t, sizeof t, 0) != sizeof t) t = static_cast<uint32_t>(std::rand()) | 1;
  }
  sessions_[t];
  return t;
}

void Probes::close(uint32_t token) { sessions_.erase(token); }

bool Probes::send(engine::Time now, uint32_t token, engine::PeerId peer, engine::Path path,
                  uint32_t seq, uint8_t tclass) {
  if (!sessions_.count(token)) return false;
  wire::Packet p;
  p.common.kind = wire::Kind::kProbe;
  p.common.dst_qpn = 0;
  p.common.token = token;
  p.common.ev = path.ev;
  p.common.psn = seq;
  p.common.ts = static_cast<uint64_t>(now.count());
  uint8_t buf[wire::kMaxHeaderSize];
  const size_t n = wire::encode_header(p, {}, buf);
  return send_(peer, path, {buf, n}, tclass);
}

std::vector<ProbeReply> Probes::take(uint32_t token) {
  auto it = sessions_.find(token);
  if (it == sessions_.end()) return {};
  return std::exchange(it->second, {});
}

bool Probes::on_reply(engine::Time now, const wire::Packet& r, uint16_t plane) {
  auto it = sessions_.find(r.common.token);
  if (it == sessions_.end() || r.probe_reply.echo_ev != r.common.ev) return false;
  if (it->second.size() >= kMaxRepliesHeld) return false;
  ProbeReply out;
  out.seq = r.common.psn;
  out.path = engine::Path{r.common.ev, plane};
  out.rtt = std::max(engine::Duration{0},
                     now - engine::Time{static_cast<int64_t>(r.probe_reply.echo_ts)});
  out.ecn = (r.probe_reply.probe_flags & wire::ack_flag::kEcnEcho) != 0;
  out.svc = std::min(engine::Duration{r.probe_reply.svc_ns}, out.rtt);
  it->second.push_back(out);
  return true;
}

bool Probes::may_answer(engine::Time now) {
  const double add = std::chrono::duration<double>(now - budget_at_).count() * kAnswersPerSecond;
  budget_ = std::min<double>(kAnswerBurst, budget_ + std::max(add, 0.0));
  budget_at_ = now;
  if (budget_ < 1) return false;
  budget_ -= 1;
  return true;
}

size_t Probes::build_answer(engine::Time now, const wire::Packet& probe, bool ecn,
                            std::span<uint8_t> out, engine::Duration svc) {
  wire::Packet a;
  a.common.kind = wire::Kind::kProbeReply;
  a.common.dst_qpn = 0;
  a.common.token = probe.common.token;
  a.common.ev = probe.common.ev;
  a.common.psn = probe.common.psn;
  a.common.ts = static_cast<uint64_t>(now.count());
  a.probe_reply.echo_ev = probe.common.ev;
  a.probe_reply.echo_ts = probe.common.ts;
  a.probe_reply.probe_flags = ecn ? wire::ack_flag::kEcnEcho : 0;
  // At least 1 ns: 0 would read as "not reported".
  a.probe_reply.svc_ns =
      static_cast<uint32_t>(std::clamp<int64_t>(svc.count(), 1, int64_t{wire::kMaxProbeSvcNs}));
  return wire::encode_header(a, {}, out);
}

}  // namespace mrc::io

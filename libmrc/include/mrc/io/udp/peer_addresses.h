// Learning a peer's plane addresses on the wire: a QP toward a peer known by one address (a
// verbs GID) asks the peer's driver for its address on every plane, so that in kDirect and
// kEcmp mode each plane's EVs go to the peer's port in that plane instead of all to one.
// Threading: none of its own; the UdpDriver owns one and calls it only under its mutex.
//
// Wire (docs/wire-format.md): an ADDR_QUERY with dst_qpn 0, bound to one QP pair: its token
// is the token the peer's QP expects in data packets (QpAttr::remote_token of the asking QP),
// target_qpn that QP, src_qpn the asking QP, psn a random nonce. The peer's driver answers
// only when a QP of its own is `target_qpn`, expects that token, is connected back to
// `src_qpn`, and is at RTR or later (matches()): anyone else's query is refused, counted, and
// unanswered. The ADDR_REPLY carries the answering QP's remote_token (what the asking QP
// expects), target_qpn = the asking QP, src_qpn the answering QP, the nonce, and the
// answering host's address and port per plane. The asker takes a reply only when every one
// of those matches its open query and the reply came from the address it asked; so nobody
// who does not hold the QP pair's tokens can redirect its traffic. (Verbs QPs derive their
// tokens from GIDs and QPNs: there the query is as safe as the data path itself.)
//
// Retries: the peer's QP may reach RTR a little after ours (perftest moves both at once), so a
// refused or lost query is sent again after kFirstRetry, doubling, kTries times in all, on the
// planes in turn. A peer that never answers (an older MRC, a fabric that drops the query)
// keeps the address it was known by: the QP works as before, on that one address.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "mrc/engine/engine.h"
#include "mrc/engine/types.h"
#include "mrc/wire/wire.h"

namespace mrc::io {

class PeerAddresses {
 public:
  static constexpr uint32_t kTries = 8;                       // queries per learning
  static constexpr engine::Duration kFirstRetry{10'000'000};  // 10 ms, doubling: ~2.5 s
  static constexpr uint32_t kAnswerBurst = 64;                // answers at once, then...
  static constexpr uint32_t kAnswersPerSecond = 1000;         // ...this many a second

  /// The QP pair a query is bound to (from the asking QP's attributes).
  struct Binding {
    engine::Qpn qpn = 0;        // the asking QP
    engine::Qpn dest_qpn = 0;   // the peer's QP
    uint32_t remote_token = 0;  // what the peer's QP expects (the query's token)
    uint32_t local_token = 0;   // what the asking QP expects (the reply's token)
  };
  /// A query to send now: to `to` (the peer's known address), from local plane `plane`.
  struct Query {
    engine::PeerId peer = 0;
    uint16_t plane = 0;
    sockaddr_in6 to{};
    std::array<uint8_t, wire::kCommonSize + wire::kAddrQueryExtSize> bytes{};
  };
  /// A reply that matched its query: the peer's plane addresses (entries as sent).
  struct Learned {
    engine::PeerId peer = 0;
    std::vector<wire::AddrHeader::Plane> planes;
  };

  // ---- Asker ----
  /// Starts learning `peer`'s addresses through the QP pair `b`. `known`: where each local
  /// plane sends to the peer now (its one known address; the port of each plane); queries go
  /// out on the planes in turn, to that plane's entry, and a reply counts only from one of
  /// them. False (nothing done) for an empty `known`, while a learning of `peer` is under way
  /// or has succeeded; a learning that gave up is started again.
  bool start(engine::Time now, engine::PeerId peer, std::vector<sockaddr_in6> known,
             const Binding& b);
  /// Queries due at `now` (first tries and retries); learnings past kTries give up here
  /// (counted in *gave_up).
  std::vector<Query> due(engine::Time now, uint64_t* gave_up);
  /// Earliest time due() has something to do; engine::kNever when nothing is open.
  engine::Time next_deadline() const;
  /// A decoded ADDR_REPLY from `from`: the learned addresses when it answers an open query
  /// (that learning is then done); nullopt when nothing matches (the driver counts a drop).
  std::optional<Learned> on_reply(const wire::Packet& reply, const sockaddr_in6& from);
  /// Whether `peer` has been learned.
  bool learned(engine::PeerId peer) const;

  // ---- Answerer ----
  /// Whether a query may be answered by `qp` (its attributes, from Engine::query_qp): the
  /// QP expects the query's token, is connected back to its src_qpn, and is at RTR or later.
  static bool matches(const wire::Packet& query, const engine::QpAttr& qp);
  /// Rate limit of answers: whether one may go out now (one taken).
  bool may_answer(engine::Time now);
  /// The reply to `query` from QP `qp` (matches() held) listing `planes` (at most
  /// wire::kMaxAddrPlanes are sent), into `out` (>= wire::kAddrReplySize bytes); its length.
  static size_t build_reply(engine::Time now, const wire::Packet& query, const engine::QpAttr& qp,
                            engine::Qpn qpn, std::span<const sockaddr_in6> planes,
                            std::span<uint8_t> out);

 private:
  struct Learning {
    std::vector<sockaddr_in6> known;  // per local plane
    Binding b;
    uint32_t nonce = 0;
    uint32_t sent = 0;  // queries sent so far
    engine::Time next{0};
    enum class State : uint8_t { kAsking, kLearned, kGaveUp } state = State::kAsking;
  };
  std::map<engine::PeerId, Learning> peers_;
  double budget_ = kAnswerBurst;
  engine::Time budget_at_{0};
};

}  // namespace mrc::io

// The connection manager's messages (verbs/cm.h): what two processes' CM services exchange
// over their TCP connection to set up, refuse and tear down one RC connection (or, for
// RDMA_PS_UDP ids, to tell a UD peer its QP number). Every message
// is one fixed-size CmMsg, fields in host byte order of the sender checked by `magic` (hosts
// of one cluster share an architecture; a peer of the other byte order is refused as not an
// MRC CM). Threading: types only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrc::verbs::cm {

inline constexpr uint32_t kCmMagic = 0x4d524331;  // "MRC1"

enum class MsgType : uint8_t {
  kReq = 1,   // active -> passive: connect, with the active side's QP and private data
  kRep = 2,   // passive -> active: accepted, with the passive side's QP and private data
  kRtu = 3,   // active -> passive: ready to use (the active QP is at RTS)
  kRej = 4,   // either way: refused (rdma_reject), with private data
  kDreq = 5,  // either way: disconnect
  kDrep = 6,  // answer to kDreq
};

// Private data sizes librdmacm allows on RoCE (IB CM minus the rdma_cm header where there
// is one): REQ 56, REP 196, REJ 148, DREQ 52 bytes.
inline constexpr uint8_t kReqPrivate = 56;
inline constexpr uint8_t kRepPrivate = 196;
inline constexpr uint8_t kRejPrivate = 148;
// RDMA_PS_UDP (IB CM's SIDR REQ 216 and REP 136, minus the rdma_cm header on the REQ).
inline constexpr uint8_t kSidrReqPrivate = 180;
inline constexpr uint8_t kSidrRepPrivate = 136;
inline constexpr size_t kMaxPrivate = 196;
inline constexpr size_t kMaxPorts = 8;  // plane ports carried (outside a fabric)

struct CmMsg {
  uint32_t magic = kCmMagic;
  MsgType type{};
  uint8_t private_len = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t retry_count = 0;
  uint8_t rnr_retry_count = 0;
  uint8_t nports = 0;  // entries of `ports` used
  // 1: an RDMA_PS_UDP exchange (service ID resolution, IB CM's SIDR): a REQ answered by one
  // REP (the passive side's UD QP number; Q_Key RDMA_UDP_QKEY) or REJ; no RTU, no connection.
  uint8_t ud = 0;
  uint32_t qpn = 0;   // the sender's QP number
  uint32_t psn = 0;   // the sender's starting send PSN (kept for ibv_query_qp)
  uint8_t gid[16]{};  // the sender's mrc0 GID 0: names it to the verbs device (verbs.h peers)
  uint16_t ports[kMaxPorts]{};  // the sender's UDP port per plane (peers outside a fabric)
  uint8_t private_data[kMaxPrivate]{};
};
static_assert(sizeof(CmMsg) == 248);

}  // namespace mrc::verbs::cm

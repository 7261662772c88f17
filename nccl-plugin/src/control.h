// The plugin's control connection: the handshake frames a connector and an acceptor exchange
// over TCP (layout, encoder, checked decoder), and a non-blocking stream that moves them.
// Threading: plain functions and a stream owned by one comm (one caller at a time).
//
// A connection is set up in three frames, then the socket stays open as a liveness signal:
//
//   connector                                 acceptor (listen comm)
//   HELLO {listen_id, endpoint}    ------>    checks listen_id, makes its QP, RTR/RTS
//                                  <------    REPLY {endpoint}
//   RTR/RTS its QP
//   READY                          ------>    accept() returns the recv comm
//   ... data over MRC ...
//   BYE {delivered per QP}         <------    closeRecv: how many WRITE_IMMs each QP received,
//                                             so a sender still waiting for their ACKs
//                                             completes them (each QP delivers in order)
//
// An endpoint is what a peer needs to reach a comm's QPs: the path mode, the fabric host id
// (srv6) or the address of every plane (direct, ecmp), the QPNs (the acceptor makes as many as
// the connector's HELLO lists, paired in order), the token they expect, their MTU.
//
// Frame: {u32 magic "MRCN", u16 version, u16 type, u32 body length} + body, little endian.
// HELLO/REPLY body: u64 listen_id, u8 path mode, u8 planes, u8 QPs, u8 reserved, u32 fabric
// host, u32 token, u32 mtu, the eager ring {u64 address, u32 rkey, u32 slots, u32 slot bytes}
// (a receive comm's, net.h; all 0: none), per QP u32 qpn, then per plane {16 B address, u16
// port, u32 scope id}. READY: empty. BYE: u8 QPs, per QP u64 delivered, u32 eager messages
// copied. Every field is checked on decode; a frame from an older or newer plugin version is
// refused with a message that says so.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mrc/common/fd.h"
#include "mrc/common/result.h"
#include "mrc/io/udp/udp_driver.h"

namespace mrc::nccl {

inline constexpr uint32_t kFrameMagic = 0x4e43524d;  // "MRCN" as little-endian bytes
inline constexpr uint16_t kFrameVersion = 3;         // 2: several QPs per connection; 3: eager
inline constexpr size_t kFrameHeader = 12;
inline constexpr size_t kMaxPlanes = 16;
inline constexpr size_t kMaxQps = 8;  // QPs per connection
inline constexpr size_t kMaxEagerSlots = 64;         // an eager ring's slots, at most
inline constexpr size_t kMaxEagerSlotBytes = 4 + 65536;  // its slot: tag, then the message
inline constexpr size_t kMaxFrameBody = 44 + kMaxQps * 4 + kMaxPlanes * 22;

enum class FrameType : uint16_t { kHello = 1, kReply = 2, kReady = 3, kBye = 4 };

struct Endpoint {
  io::PathMode mode = io::PathMode::kDirect;
  uint32_t fabric_host = 0;          // kSrv6
  std::vector<sockaddr_in6> planes;  // kDirect/kEcmp: every plane's address and port
  std::vector<uint32_t> qpns;        // 1..kMaxQps
  uint32_t token = 0;
  uint32_t mtu = 4096;
  // A receive comm's eager ring (net.h): where its sender writes small messages that go
  // before their receive's CTS. slots 0: none (a send comm, or eager sends off).
  uint64_t eager_addr = 0;
  uint32_t eager_rkey = 0;
  uint32_t eager_slots = 0;
  uint32_t eager_slot_bytes = 0;
};

struct Frame {
  FrameType type = FrameType::kReady;
  uint64_t listen_id = 0;  // HELLO
  Endpoint endpoint;       // HELLO, REPLY
  std::vector<uint64_t> delivered;  // BYE: WRITE_IMMs received, per QP (1..kMaxQps)
  uint32_t eager_copied = 0;        // BYE: eager messages copied into receives (net.h)
};

std::vector<uint8_t> encode(const Frame& f);
/// Body length announced by a frame header; an error for a bad magic, version or length.
Result<size_t, std::string> frame_body_length(std::span<const uint8_t, kFrameHeader> header);
/// Decodes one whole frame (header + body), checking every field.
Result<Frame, std::string> decode(std::span<const uint8_t> bytes);

/// A non-blocking TCP stream carrying frames.
class Stream {
 public:
  Stream() = default;
  explicit Stream(UniqueFd fd) : fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }

  void queue(const Frame& f);
  /// Writes what is queued; true once all of it is out.
  Result<bool, std::string> flush();
  /// Reads what has arrived; a frame once a whole one is there, nullopt before.
  /// Errors: the peer closed ("closed by the peer"), socket errors, malformed frames.
  Result<std::optional<Frame>, std::string> read_frame();

 private:
  UniqueFd fd_;
  std::vector<uint8_t> out_;
  std::vector<uint8_t> in_;
};

/// Starts a non-blocking TCP connect; finish it with connect_finished.
Result<UniqueFd, std::string> start_connect(const sockaddr_in6& to);
/// True once connected; an error if the connect failed (named with the address).
Result<bool, std::string> connect_finished(int fd, const sockaddr_in6& to);
/// A non-blocking listening socket on `at` (port 0: any); returns it and its bound address.
Result<std::pair<UniqueFd, sockaddr_in6>, std::string> listen_on(sockaddr_in6 at);
/// "[fd00::1]:4791"
std::string to_string(const sockaddr_in6& a);

}  // namespace mrc::nccl

// libnccl-net-mrc's one implementation; every ncclNetPlugin_vN table (exports.cc) is a thin
// adapter over these functions, which return errors as values (exports.cc turns them into
// ncclResult_t and a WARN line, once).
//
// Threading: NCCL calls from its proxy threads. Process-wide state (devices, the init count) is
// under one mutex; a comm and its requests are used by one thread at a time (NCCL's rule); the
// data path goes through each device's UdpDriver, which is thread-safe.
//
// Devices: one NCCL device per MRC NIC: a UdpDriver (one engine, a socket per plane, a progress
// thread) built from a host config (knobs.h: NCCL_MRC_CONFIG, else libmrc's lookup). All the
// NIC's planes sit behind the one device; the engine sprays every connection over all of them.
//
// Connections: listen/connect/accept never block. They are staged over a TCP control
// connection (control.h); connect() and accept() return a NULL comm until the handshake is
// done. The stage of a connect lives in NCCL's handle (NCCL passes the same handle again).
// Each comm owns one MRC QP and one CQ; the control connection stays open and tells a comm
// that its peer is gone (closed or killed) at once.
//
// Transfers, receiver driven (the shape of NCCL's IB transport, over MRC verbs):
//   irecv(n buffers, tags) -> the receiver SENDs a clear-to-send (CTS) record {seq, n, eager
//       slots freed, per buffer: address, rkey, size, tag} to the sender (inline, 12 + 20 n
//       bytes);
//   isend(data, tag)       -> waits (returns a NULL request) until the CTS of its sequence
//       number has arrived, picks the buffer with its tag (none still free: NULL too, the
//       send is for a later receive, as NCCL's IB transport answers), then one WRITE_IMM of
//       the data into it, imm = (seq << 3) | buffer index; done when the WRITE_IMM is
//       acknowledged;
//   the receiver's request is done when every buffer got its WRITE_IMM (the completion
//       carries the size). Receives for WRITE_IMMs are posted up front and reposted.
// Eager sends (NCCL_MRC_EAGER, 8 KiB; one QP per connection, once a CTS record came and none
//   for a grouped receive: a group's sends may come in any order of tags): a message that
//   small whose CTS has not come yet does not wait for it. The receive comm offers an eager ring in its REPLY
//   (8 slots, each the tag then the message); isend WRITE_IMMs {tag, data} into the next free
//   slot, imm = kEagerImm | slot, and returns its request at once. This takes the CTS's trip
//   off the first step of every collective (both ranks post a receive and a send at once),
//   where NCCL's sockets need none. The receiver copies each eager message, in the order they
//   come, into the receive it belongs to (waiting for irecv if it is not posted yet) and frees
//   its slot; every CTS record says how many slots were freed, so the sender reuses them. Which
//   buffer a message belongs to follows one rule on both ends: in FIFO order, the first buffer
//   of the current receive with its tag not yet sent to. The sender applies it to its eager
//   sends once their receive's CTS comes (place_eager: a send that does not fit is an error
//   then, InvalidUsage, and its request is not done before it is placed), so a later CTS-driven
//   send picks the same buffer the receiver expects. In-order completion of the one QP makes
//   the receiver's count agree. A receiver that closes counts its eager messages copied in its
//   BYE; an eager send not among them fails (the peer never posted its receive).
// Sends and receives match in FIFO order per connection; a send larger than its receive is an
// error (InvalidUsage), as NCCL requires.
//
// Failure is an error, never a hang: a QP that exhausts its retry budget (every path dead for
// longer than NCCL_MRC_TIMEOUT/RETRY_CNT allow) flushes its work with errors; a closed or reset
// control connection fails the requests that still need the peer. test() then returns
// RemoteError (SystemError for local causes) with the reason in a WARN line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mrc/common/result.h"
#include "nccl_net_abi.h"

namespace mrc::nccl {

/// ncclResult_t values this plugin returns.
enum class Code : uint8_t {
  kSystem = mrcNcclSystemError,
  kInternal = mrcNcclInternalError,
  kInvalidArgument = mrcNcclInvalidArgument,
  kInvalidUsage = mrcNcclInvalidUsage,
  kRemote = mrcNcclRemoteError,
};
struct Failure {
  Code code = Code::kInternal;
  std::string what;
};
using NetStatus = Status<Failure>;

inline constexpr int kMaxRecvs = 8;  // receives grouped in one irecv (3 bits of the imm)
inline constexpr int kMaxRequests = MRC_NCCL_NET_MAX_REQUESTS;
inline constexpr const char* kPluginName = "MRC";

/// Version-neutral properties; exports.cc fills each version's struct from them.
struct Props {
  const char* name = nullptr;  // "mrc0"; lives as long as the plugin is initialised
  uint64_t guid = 0;
  int speed_mbps = 0;
  float latency_us = 0;
  int max_comms = 65536;
  int max_recvs = kMaxRecvs;
  size_t max_p2p_bytes = MRC_NCCL_MAX_NET_SIZE;
  size_t max_coll_bytes = MRC_NCCL_MAX_COLLNET_SIZE;
};

struct ListenComm;
struct Comm;  // a send or a receive comm
struct Request;
struct MemHandle;

/// Every init is matched by one finalize (v11+: per communicator; v6..v10: init once, the
/// library's unloading finalizes). The first init reads the knobs and opens the devices; the
/// last finalize closes them. `logger` may be null (WARN lines go to stderr then).
NetStatus init(mrcNcclLogger logger);
void finalize();

int device_count();
Result<Props, Failure> properties(int dev);

/// Fills NCCL's handle (<= 128 bytes) with what a peer needs to connect.
NetStatus listen(int dev, void* handle, ListenComm** out);
/// *out stays null until the connection is ready; call again with the same handle.
NetStatus connect(int dev, void* handle, Comm** out);
/// *out stays null until a connection is ready.
NetStatus accept(ListenComm* l, Comm** out);

/// Host memory only (MRC_NCCL_PTR_HOST); other types are InvalidArgument.
NetStatus reg_mr(Comm* c, void* data, size_t size, int type, MemHandle** out);
NetStatus dereg_mr(Comm* c, MemHandle* mh);

/// *out null: try again later (the receiver has not posted the matching receive yet).
NetStatus isend(Comm* c, void* data, size_t size, int tag, MemHandle* mh, Request** out);
/// n in 1..kMaxRecvs; *out null: try again later (kMaxRequests receives in flight).
NetStatus irecv(Comm* c, int n, void** data, const size_t* sizes, const int* tags,
                MemHandle** mhandles, Request** out);
/// sizes: one int for a send, n for a receive (may be null). Never blocks.
NetStatus test(Request* r, int* done, int* sizes);

NetStatus close_send(Comm* c);
NetStatus close_recv(Comm* c);
NetStatus close_listen(ListenComm* l);

/// Logs through NCCL's logger (NET subsystem) or, without one, WARN and above to stderr.
void log(mrcNcclLogLevel level, const std::string& line);

}  // namespace mrc::nccl

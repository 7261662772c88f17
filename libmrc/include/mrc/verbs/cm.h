// The connection manager of the software verbs device: librdmacm's application API (types in
// verbs/rdma_cm_abi.h) over mrc0, which the verbs shim exports as rdma_* so rping, perftest
// -R and other rdma_cm programs run unmodified. Each function does what the librdmacm
// function of the same name (rdma_<name>) does, with its return convention (0, or -1 with
// errno; pointers: NULL with errno), and logs one line "mrc-rdmacm: <problem>" to stderr
// when it refuses something.
//
// How a connection is made: rdma_cm ids are TCP endpoints of a CM service thread (one per
// process, started at first use). rdma_listen listens on the id's IP address and port (a
// plane port's address, a management network's, loopback: any the host has); rdma_connect
// opens a TCP connection to the destination and sends a REQ (cm_wire.h) with its QP's
// number, mrc0's GID and plane ports, and the private data; the passive side reports
// CONNECT_REQUEST on the listener's channel with a new id; rdma_accept moves that id's QP to
// RTS toward the peer and answers REP; the active side moves its QP to RTS, answers RTU and
// reports ESTABLISHED; the passive side reports ESTABLISHED on the RTU. rdma_reject answers
// REJ (REJECTED at the peer, status 28, with the private data); rdma_disconnect moves the QP
// to ERR and sends DREQ (DISCONNECTED at both ends; a peer that goes away without one, its
// TCP connection closing, is DISCONNECTED too). A destination with nothing listening (still
// refused after 3 s of tries every 20 ms, so a server listening again between two phases, as
// perftest -R does, is not missed), or no TCP answer within 5 s, is UNREACHABLE (status
// -ECONNREFUSED / -ETIMEDOUT) with a line naming the address. A handshake step with no
// answer in 30 s (a REQ with no REP or REJ: UNREACHABLE; a REP with no RTU: CONNECT_ERROR;
// both -ETIMEDOUT) fails, and a TCP client that never sends its REQ is closed. The TCP sockets
// close with the id (rdma_destroy_id returns once the port is free) or the process: no port stays
// bound.
//
// The peer's verbs details: the GID in the REQ/REP names the peer host to mrc0 exactly as
// a verbs program's GID does (verbs.h "peers"); outside a fabric the plane ports travel too
// and go into the device's peer table when the REQ/REP arrives (before any QP toward the
// peer reaches RTR, the CM's or the app's own: rping -q), so two processes of one host
// (loopback planes, different ports) find each other. Only the ACTIVE side's
// rdma_establish (a QP the app moved itself) reports nothing locally, as librdmacm.
//
// RDMA_PS_UDP ids (UD QPs; IB CM's service ID resolution): rdma_create_qp takes the UD QP to
// RTS with Q_Key RDMA_UDP_QKEY; rdma_connect sends a REQ, the passive side gets
// CONNECT_REQUEST and rdma_accept answers REP with its QP number (it hears nothing more); the
// active side gets ESTABLISHED with param.ud (the peer's QP number, RDMA_UDP_QKEY, the AH
// attributes that reach it) and the TCP connection closes; a reject is UNREACHABLE (status
// MRC_CM_SIDR_REJECT) at the active side; rdma_disconnect is EINVAL. Other port spaces fail
// with EPROTONOSUPPORT and a line.
//
// The id's PD (id->pd) is mrc0's one CM PD from bind or address resolution on, as
// librdmacm's device PD: apps make their own QPs on it (ibv_create_qp(id->pd, ...)) and
// connect them with rdma_connect/rdma_accept's qp_num, rdma_init_qp_attr and rdma_establish.
// A QP asked for without CQs gets its own send and receive CQs with completion
// channels, as librdmacm makes them. After DISCONNECTED comes TIMEWAIT_EXIT, once the QP's
// local ACK timeout has passed (no packet of the old connection can still arrive). PSNs are
// random (getrandom). Multicast: join_multicast below. A forked child gets a service of its
// own (the parent's ids stay the parent's).
// Threading: every function is thread-safe (one mutex for all ids); events are posted by
// the service thread.
#pragma once

#include <cstdint>

#include "mrc/verbs/rdma_cm_abi.h"

namespace mrc::verbs::cm {

rdma_event_channel* create_event_channel();
void destroy_event_channel(rdma_event_channel* channel);
int create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps);
int destroy_id(rdma_cm_id* id);
int bind_addr(rdma_cm_id* id, sockaddr* addr);
int resolve_addr(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int timeout_ms);
int resolve_route(rdma_cm_id* id, int timeout_ms);
int listen(rdma_cm_id* id, int backlog);
int connect(rdma_cm_id* id, rdma_conn_param* param);
int accept(rdma_cm_id* id, rdma_conn_param* param);
int reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len);
int establish(rdma_cm_id* id);
int disconnect(rdma_cm_id* id);
int get_cm_event(rdma_event_channel* channel, rdma_cm_event** event);
int ack_cm_event(rdma_cm_event* event);
int create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr);
/// Multicast (docs/verbs-shim.md "Multicast"), RDMA_PS_UDP ids bound or resolved: a full
/// member's QP (the id's, if it has one) is attached to the group (ibv_attach_mcast), a send-only
/// one is not; RDMA_CM_EVENT_MULTICAST_JOIN follows at once with param.ud (the context as its
/// private_data; an AH to the group's GID, QPN 0xFFFFFF, RDMA_UDP_QKEY). EINVAL: not a
/// multicast address, not a UD id; EADDRINUSE: joined already. leave: EADDRNOTAVAIL for a
/// group not joined; destroy_id leaves what is left.
int join_multicast(rdma_cm_id* id, sockaddr* addr, void* context);
int join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context);
int leave_multicast(rdma_cm_id* id, sockaddr* addr);
int create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr);
void destroy_qp(rdma_cm_id* id);
int init_qp_attr(rdma_cm_id* id, ibv_qp_attr* attr, int* mask);
int migrate_id(rdma_cm_id* id, rdma_event_channel* channel);
int set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen);
uint16_t get_src_port(rdma_cm_id* id);  // network byte order, as librdmacm returns it
uint16_t get_dst_port(rdma_cm_id* id);
const char* event_str(rdma_cm_event_type event);
int getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                rdma_addrinfo** res);
void freeaddrinfo(rdma_addrinfo* res);
// Synchronous ids (rdma_create_id without a channel, rdma_create_ep): connect, accept and
// rdma_create_ep's resolution wait for their event; rdma_get_request waits for a request
// and makes its QP from rdma_create_ep's attributes.
int create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* attr);
int get_request(rdma_cm_id* listen, rdma_cm_id** id);
void destroy_ep(rdma_cm_id* id);

}  // namespace mrc::verbs::cm

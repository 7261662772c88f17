// librdmacm's application ABI as rdma-core 44 ships it (<rdma/rdma_cma.h>), declared here in
// our own words because librdmacm-dev is not a dependency: the types a program compiled
// against rdma-core 44 hands to rdma_* functions, with the same names, members, order and
// sizes (checked by static_assert below against the x86-64 layout), and the constants
// programs pass. The verbs shim defines the rdma_* functions (verbs-shim/src/rdmacm.cc) over
// libmrc's connection manager (verbs/cm.h). Threading: types only.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

extern "C" {

// Events reported on an event channel (rdma_get_cm_event); the values are the ABI.
enum rdma_cm_event_type {
  RDMA_CM_EVENT_ADDR_RESOLVED,
  RDMA_CM_EVENT_ADDR_ERROR,
  RDMA_CM_EVENT_ROUTE_RESOLVED,
  RDMA_CM_EVENT_ROUTE_ERROR,
  RDMA_CM_EVENT_CONNECT_REQUEST,
  RDMA_CM_EVENT_CONNECT_RESPONSE,
  RDMA_CM_EVENT_CONNECT_ERROR,
  RDMA_CM_EVENT_UNREACHABLE,
  RDMA_CM_EVENT_REJECTED,
  RDMA_CM_EVENT_ESTABLISHED,
  RDMA_CM_EVENT_DISCONNECTED,
  RDMA_CM_EVENT_DEVICE_REMOVAL,
  RDMA_CM_EVENT_MULTICAST_JOIN,
  RDMA_CM_EVENT_MULTICAST_ERROR,
  RDMA_CM_EVENT_ADDR_CHANGE,
  RDMA_CM_EVENT_TIMEWAIT_EXIT
};

// Port spaces of rdma_create_id: mrc0 has RDMA_PS_TCP (RC QPs) and RDMA_PS_UDP (UD QPs).
enum rdma_port_space {
  RDMA_PS_IPOIB = 0x0002,
  RDMA_PS_TCP = 0x0106,
  RDMA_PS_UDP = 0x0111,
  RDMA_PS_IB = 0x013F,
};

struct ibv_sa_path_rec;  // opaque here: mrc0 reports no path records (num_paths 0)

struct rdma_ib_addr {
  ibv_gid sgid;  // our GID (mrc0's GID 0)
  ibv_gid dgid;  // the peer's, once the connection exchange has told it
  __be16 pkey;
};

struct rdma_addr {
  union {
    sockaddr src_addr;
    sockaddr_in src_sin;
    sockaddr_in6 src_sin6;
    sockaddr_storage src_storage;
  };
  union {
    sockaddr dst_addr;
    sockaddr_in dst_sin;
    sockaddr_in6 dst_sin6;
    sockaddr_storage dst_storage;
  };
  union {
    rdma_ib_addr ibaddr;
  } addr;
};

struct rdma_route {
  rdma_addr addr;
  ibv_sa_path_rec* path_rec;
  int num_paths;
};

struct rdma_event_channel {
  int fd;  // pollable: readable while events are queued
};

struct rdma_cm_event;

struct rdma_cm_id {
  ibv_context* verbs;  // mrc0's context once bound (bind, resolve_addr, a connect request)
  rdma_event_channel* channel;
  void* context;  // the app's
  ibv_qp* qp;     // the QP rdma_create_qp made
  rdma_route route;
  rdma_port_space ps;
  uint8_t port_num;
  rdma_cm_event* event;  // synchronous ids only (rdma_create_ep)
  ibv_comp_channel* send_cq_channel;
  ibv_cq* send_cq;
  ibv_comp_channel* recv_cq_channel;
  ibv_cq* recv_cq;
  ibv_srq* srq;
  ibv_pd* pd;
  ibv_qp_type qp_type;
};

enum { RDMA_MAX_RESP_RES = 0xFF, RDMA_MAX_INIT_DEPTH = 0xFF };

struct rdma_conn_param {
  const void* private_data;
  uint8_t private_data_len;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t flow_control;
  uint8_t retry_count;  // ignored when accepting
  uint8_t rnr_retry_count;
  uint8_t srq;  // these two only where no QP is made on the id
  uint32_t qp_num;
};

struct rdma_ud_param {
  const void* private_data;
  uint8_t private_data_len;
  ibv_ah_attr ah_attr;
  uint32_t qp_num;
  uint32_t qkey;
};

struct rdma_cm_event {
  rdma_cm_id* id;
  rdma_cm_id* listen_id;  // CONNECT_REQUEST: the listening id
  rdma_cm_event_type event;
  int status;  // 0, a negative errno, or (REJECTED) the reject reason
  union {
    rdma_conn_param conn;
    rdma_ud_param ud;
  } param;
};

// rdma_join_multicast_ex (librdmacm's ABI: rdma_join_multicast_ex(3)).
enum rdma_cm_join_mc_attr_mask {
  RDMA_CM_JOIN_MC_ATTR_ADDRESS = 1 << 0,
  RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS = 1 << 1,
  RDMA_CM_JOIN_MC_ATTR_RESERVED = 1 << 2,
};
enum rdma_cm_mc_join_flags {
  RDMA_MC_JOIN_FLAG_FULLMEMBER,           // sends to the group and receives from it
  RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,  // sends only: the QP is not attached
  RDMA_MC_JOIN_FLAG_RESERVED,
};
struct rdma_cm_join_mc_attr_ex {
  uint32_t comp_mask;   // rdma_cm_join_mc_attr_mask bits
  uint32_t join_flags;  // one rdma_cm_mc_join_flags value
  sockaddr* addr;       // the group's multicast address
};

// rdma_addrinfo flags.
#define RAI_PASSIVE 0x00000001
#define RAI_NUMERICHOST 0x00000002
#define RAI_NOROUTE 0x00000004
#define RAI_FAMILY 0x00000008

struct rdma_addrinfo {
  int ai_flags;
  int ai_family;
  int ai_qp_type;
  int ai_port_space;
  socklen_t ai_src_len;
  socklen_t ai_dst_len;
  sockaddr* ai_src_addr;
  sockaddr* ai_dst_addr;
  char* ai_src_canonname;
  char* ai_dst_canonname;
  size_t ai_route_len;
  void* ai_route;
  size_t ai_connect_len;
  void* ai_connect;
  rdma_addrinfo* ai_next;
};

// rdma_set_option levels and names.
enum { RDMA_OPTION_ID = 0, RDMA_OPTION_IB = 1 };
enum {
  RDMA_OPTION_ID_TOS = 0,          // uint8_t
  RDMA_OPTION_ID_REUSEADDR = 1,    // int
  RDMA_OPTION_ID_AFONLY = 2,       // int
  RDMA_OPTION_ID_ACK_TIMEOUT = 3,  // uint8_t
};
enum { RDMA_OPTION_IB_PATH = 1 };

// The reject reason a REJECTED event carries after the peer's rdma_reject (IB CM's
// "consumer defined", what librdmacm reports on RoCE).
enum { MRC_CM_REJ_CONSUMER_DEFINED = 28 };
// The Q_Key of every RDMA_PS_UDP id's QP (rdma_cma.h's RDMA_UDP_QKEY; rdma_post_ud_send sends
// to it), and the status of the UNREACHABLE event an RDMA_PS_UDP request gets when the passive
// side rejects it (IB CM's SIDR status "rejected", as the kernel's CM reports it).
#define RDMA_UDP_QKEY 0x01234567
enum { MRC_CM_SIDR_REJECT = 2 };

}  // extern "C"

static_assert(sizeof(rdma_addr) == 2 * sizeof(sockaddr_storage) + 40);
static_assert(offsetof(rdma_cm_id, route) == 32);
static_assert(offsetof(rdma_cm_id, ps) == 32 + sizeof(rdma_route));
static_assert(sizeof(rdma_conn_param) == 24);
static_assert(offsetof(rdma_cm_event, param) == 24);
static_assert(sizeof(rdma_addrinfo) == 96);

// librdmacm's application API, exported by libmrc-verbs-shim.so over libmrc's connection
// manager (mrc/verbs/cm.h), so rping, perftest -R and other rdma_cm programs run over
// mrc0 unmodified. The programs' versioned references (rdma_connect@RDMACM_1.0,
// rdma_establish@RDMACM_1.2) bind here as the ibv_* ones do (exports.map). Every id is an
// mrc0 id: nothing is forwarded to the real librdmacm, which would take our objects for its
// own (docs/verbs-shim.md, "rdma_cm").
#include <cerrno>

#include "mrc/observe/publisher.h"
#include "mrc/verbs/cm.h"
#include "mrc/verbs/verbs.h"

namespace cm = mrc::verbs::cm;

namespace {
// mrcctl sees the device the CM opens, as it sees one ibv_open_device opened.
void observe() { mrc::verbs::set_driver_observer(&mrc::observe::attach_publisher); }
}  // namespace

extern "C" {

rdma_event_channel* rdma_create_event_channel() {
  observe();
  return cm::create_event_channel();
}
void rdma_destroy_event_channel(rdma_event_channel* c) { cm::destroy_event_channel(c); }
int rdma_create_id(rdma_event_channel* c, rdma_cm_id** id, void* context, rdma_port_space ps) {
  observe();
  return cm::create_id(c, id, context, ps);
}
int rdma_destroy_id(rdma_cm_id* id) { return cm::destroy_id(id); }
int rdma_bind_addr(rdma_cm_id* id, sockaddr* a) { return cm::bind_addr(id, a); }
int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int timeout_ms) {
  return cm::resolve_addr(id, src, dst, timeout_ms);
}
int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) { return cm::resolve_route(id, timeout_ms); }
int rdma_listen(rdma_cm_id* id, int backlog) { return cm::listen(id, backlog); }
int rdma_connect(rdma_cm_id* id, rdma_conn_param* p) { return cm::connect(id, p); }
int rdma_accept(rdma_cm_id* id, rdma_conn_param* p) { return cm::accept(id, p); }
int rdma_reject(rdma_cm_id* id, const void* pd, uint8_t len) { return cm::reject(id, pd, len); }
int rdma_establish(rdma_cm_id* id) { return cm::establish(id); }
// ECE (enhanced connection establishment; ibv_query_ece in shim.cc): mrc0 has none to
// exchange, so the ECE calls fail with EOPNOTSUPP, and a reject carrying one is a plain
// reject. (Not defined here, they went to the real librdmacm, which took our id for its own.)
int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) {
  errno = EOPNOTSUPP;
  return -1;
}
int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) {
  errno = EOPNOTSUPP;
  return -1;
}
int rdma_reject_ece(rdma_cm_id* id, const void* pd, uint8_t len) { return cm::reject(id, pd, len); }

int rdma_disconnect(rdma_cm_id* id) { return cm::disconnect(id); }
int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return cm::join_multicast(id, addr, context);
}
int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  return cm::join_multicast_ex(id, attr, context);
}
int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) { return cm::leave_multicast(id, addr); }
int rdma_get_cm_event(rdma_event_channel* c, rdma_cm_event** e) { return cm::get_cm_event(c, e); }
int rdma_ack_cm_event(rdma_cm_event* e) { return cm::ack_cm_event(e); }
int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* a) {
  return cm::create_qp(id, pd, a);
}
int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* a) { return cm::create_qp_ex(id, a); }
void rdma_destroy_qp(rdma_cm_id* id) { cm::destroy_qp(id); }
int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* a, int* mask) {
  return cm::init_qp_attr(id, a, mask);
}
int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* c) { return cm::migrate_id(id, c); }
int rdma_set_option(rdma_cm_id* id, int level, int name, void* val, size_t len) {
  return cm::set_option(id, level, name, val, len);
}
__be16 rdma_get_src_port(rdma_cm_id* id) { return cm::get_src_port(id); }
__be16 rdma_get_dst_port(rdma_cm_id* id) { return cm::get_dst_port(id); }
const char* rdma_event_str(rdma_cm_event_type e) { return cm::event_str(e); }
int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                     rdma_addrinfo** res) {
  return cm::getaddrinfo(node, service, hints, res);
}
void rdma_freeaddrinfo(rdma_addrinfo* res) { cm::freeaddrinfo(res); }
int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* attr) {
  observe();
  return cm::create_ep(id, res, pd, attr);
}
int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) { return cm::get_request(listen, id); }
void rdma_destroy_ep(rdma_cm_id* id) { cm::destroy_ep(id); }

}  // extern "C"

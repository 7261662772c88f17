// The connection manager (mrc/verbs/cm.h) in one process over loopback planes: a
// listener and a connecting id on 127.0.0.1, their QPs on this process's mrc0. The CM state
// machine: port spaces, calls out of order, a destination with nothing listening
// (UNREACHABLE), a reject with private data, connect/accept/establish with private data both
// ways, data over the QPs the CM connected, disconnect at both ends, the port freed; QPs the
// app made itself on the id's PD; RDMA_PS_UDP ids (UD QPs).
#include "mrc/verbs/cm.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "loopback_env.h"
#include "mrc/verbs/verbs.h"

namespace mrc::verbs::cm {
namespace {

const bool env_set = testing::set_loopback_env();

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

class CmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_set);
    ch_ = create_event_channel();
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override {
    for (ibv_qp* qp : app_qps_) verbs::destroy_qp(qp);
    for (rdma_cm_id* id : {child_, client_, server_})
      if (id) {
        destroy_qp(id);
        destroy_id(id);
      }
    for (ibv_cq* cq : cqs_) destroy_cq(cq);
    if (pd_) dealloc_pd(pd_);
    destroy_event_channel(ch_);
  }

  // The next event within 10 s (the channel's fd must become readable), acked after copying;
  // its private data is copied into `pdata`.
  rdma_cm_event next(std::string* pdata = nullptr) {
    pollfd p{ch_->fd, POLLIN, 0};
    rdma_cm_event* e = nullptr;
    rdma_cm_event copy{};
    if (::poll(&p, 1, 10000) != 1) {  // never block the test on a missing event
      ADD_FAILURE() << "no event within 10 s";
      copy.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
      return copy;
    }
    if (get_cm_event(ch_, &e) != 0) {
      ADD_FAILURE() << "get_cm_event: " << std::strerror(errno);
      copy.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
      return copy;
    }
    copy = *e;
    if (pdata)
      pdata->assign(static_cast<const char*>(e->param.conn.private_data),
                    e->param.conn.private_data_len);
    copy.param.conn.private_data = nullptr;
    ack_cm_event(e);
    return copy;
  }

  void listen_on(uint16_t port, rdma_port_space ps = RDMA_PS_TCP) {
    ASSERT_EQ(create_id(ch_, &server_, this, ps), 0);
    sockaddr_in a = loopback(port);
    ASSERT_EQ(bind_addr(server_, reinterpret_cast<sockaddr*>(&a)), 0) << std::strerror(errno);
    ASSERT_EQ(listen(server_, 8), 0);
    EXPECT_EQ(ntohs(get_src_port(server_)), port);
  }

  // A client id resolved toward 127.0.0.1:port, with a QP when `qp`.
  void resolve_to(uint16_t port, bool qp = true, rdma_port_space ps = RDMA_PS_TCP) {
    ASSERT_EQ(create_id(ch_, &client_, nullptr, ps), 0);
    sockaddr_in dst = loopback(port);
    ASSERT_EQ(resolve_addr(client_, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
    EXPECT_EQ(next().event, RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_NE(client_->verbs, nullptr);
    ASSERT_EQ(resolve_route(client_, 2000), 0);
    EXPECT_EQ(next().event, RDMA_CM_EVENT_ROUTE_RESOLVED);
    EXPECT_EQ(ntohs(get_dst_port(client_)), port);
    if (qp) make_qp(client_);
  }

  void make_qp(rdma_cm_id* id) {
    if (!pd_) pd_ = alloc_pd(id->verbs);
    ibv_cq* cq = create_cq(id->verbs, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr);
    cqs_.push_back(cq);
    ibv_qp_init_attr qa{};
    qa.send_cq = cq;
    qa.recv_cq = cq;
    qa.qp_type = id->qp_type;  // RC, or UD for an RDMA_PS_UDP id
    qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    ASSERT_EQ(create_qp(id, pd_, &qa), 0) << std::strerror(errno);
    ASSERT_NE(id->qp, nullptr);
    ibv_qp_attr at{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(query_qp(id->qp, &at, IBV_QP_STATE, &init), 0);
    // An RC QP waits for its peer; a UD QP is ready at once, as librdmacm makes it.
    EXPECT_EQ(at.qp_state, id->qp_type == IBV_QPT_UD ? IBV_QPS_RTS : IBV_QPS_INIT);
  }

  // A QP the app makes itself (ibv_create_qp) on the id's PD, as pyverbs' external-QP test.
  ibv_qp* app_qp(rdma_cm_id* id) {
    ibv_cq* cq = create_cq(id->verbs, 16, nullptr, nullptr, 0);
    if (!cq) return nullptr;
    cqs_.push_back(cq);
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    ibv_qp* qp = verbs::create_qp(id->pd, &qa);
    if (qp) app_qps_.push_back(qp);
    return qp;
  }

  // Takes an app's QP to RTS with the attributes the id gives (rdma_init_qp_attr).
  void to_rts(rdma_cm_id* id, ibv_qp* qp) {
    for (ibv_qp_state st : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
      ibv_qp_attr at{};
      at.qp_state = st;
      int mask = 0;
      ASSERT_EQ(init_qp_attr(id, &at, &mask), 0) << "state " << st;
      ASSERT_EQ(modify_qp(qp, &at, mask), 0) << "state " << st;
    }
  }

  // One SEND from `from` lands in a receive posted on `to` (UD: through `ah` to QP `rqpn`,
  // after the 40-byte GRH); both completions succeed within 5 s.
  void send_one(ibv_qp* from, ibv_qp* to, ibv_ah* ah = nullptr, uint32_t rqpn = 0) {
    const size_t grh = ah ? sizeof(ibv_grh) : 0;
    char src[64] = "over the QPs rdma_cm connected", dst[64 + sizeof(ibv_grh)] = {};
    ibv_mr* smr = reg_mr(from->pd, src, sizeof src, reinterpret_cast<uintptr_t>(src), 0);
    ibv_mr* dmr =
        reg_mr(to->pd, dst, sizeof dst, reinterpret_cast<uintptr_t>(dst), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(smr && dmr);
    ibv_sge rs{reinterpret_cast<uintptr_t>(dst), static_cast<uint32_t>(sizeof src + grh),
               dmr->lkey};
    ibv_recv_wr rwr{};
    rwr.sg_list = &rs;
    rwr.num_sge = 1;
    ibv_recv_wr* bad_r = nullptr;
    ASSERT_EQ(post_recv(to, &rwr, &bad_r), 0);
    ibv_sge ss{reinterpret_cast<uintptr_t>(src), sizeof src, smr->lkey};
    ibv_send_wr swr{};
    swr.sg_list = &ss;
    swr.num_sge = 1;
    swr.opcode = IBV_WR_SEND;
    swr.send_flags = IBV_SEND_SIGNALED;
    swr.wr.ud.ah = ah;
    swr.wr.ud.remote_qpn = rqpn;
    swr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
    ibv_send_wr* bad_s = nullptr;
    ASSERT_EQ(post_send(from, &swr, &bad_s), 0);
    int done = 0;
    for (int i = 0; i < 5000 && done < 2; ++i) {
      for (ibv_cq* cq : {from->send_cq, to->recv_cq}) {
        ibv_wc wc;
        if (poll_cq(cq, 1, &wc) != 1) continue;
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
        ++done;
      }
      if (done < 2) ::usleep(1000);
    }
    EXPECT_EQ(done, 2);
    EXPECT_STREQ(dst + grh, src);
    dereg_mr(smr);
    dereg_mr(dmr);
  }

  // No event comes within 200 ms.
  void expect_no_event() {
    pollfd p{ch_->fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 200), 0) << "an event more";
  }

  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* server_ = nullptr;
  rdma_cm_id* client_ = nullptr;
  rdma_cm_id* child_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::vector<ibv_cq*> cqs_;
  std::vector<ibv_qp*> app_qps_;
};

TEST_F(CmTest, CreateId_RefusesPortSpacesOtherThanTcpAndUdp) {
  rdma_cm_id* id = nullptr;
  for (rdma_port_space ps : {RDMA_PS_IB, RDMA_PS_IPOIB}) {
    errno = 0;
    EXPECT_EQ(create_id(ch_, &id, nullptr, ps), -1);
    EXPECT_EQ(errno, EPROTONOSUPPORT);
    EXPECT_EQ(id, nullptr);
  }
  ASSERT_EQ(create_id(ch_, &id, nullptr, RDMA_PS_UDP), 0);
  EXPECT_EQ(id->qp_type, IBV_QPT_UD);
  EXPECT_EQ(destroy_id(id), 0);
  // No channel: a synchronous id, with a channel of its own (gone with the id).
  ASSERT_EQ(create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_NE(id->channel, nullptr);
  EXPECT_EQ(destroy_id(id), 0);
}

TEST_F(CmTest, CallsOutOfOrder_Einval) {
  ASSERT_EQ(create_id(ch_, &client_, nullptr, RDMA_PS_TCP), 0);
  rdma_conn_param p{};
  p.qp_num = 1;
  EXPECT_EQ(connect(client_, &p), -1);  // no address resolved
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(resolve_route(client_, 100), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(accept(client_, nullptr), -1);  // no request on it
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(disconnect(client_), -1);
  EXPECT_EQ(errno, EINVAL);
  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_RC;
  EXPECT_EQ(create_qp(client_, nullptr, &qa), -1);  // no device before bind/resolve
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(CmTest, Connect_NobodyListening_Unreachable) {
  const uint16_t port = testing::free_tcp_port();
  resolve_to(port);
  char big[57] = {};
  rdma_conn_param p{};
  p.private_data = big;
  p.private_data_len = sizeof big;  // over the 56 a request carries
  EXPECT_EQ(connect(client_, &p), -1);
  EXPECT_EQ(errno, EINVAL);
  p.private_data_len = 8;
  ASSERT_EQ(connect(client_, &p), 0);
  const rdma_cm_event e = next();
  EXPECT_EQ(e.event, RDMA_CM_EVENT_UNREACHABLE);
  EXPECT_EQ(e.status, -ECONNREFUSED);
  EXPECT_EQ(e.id, client_);
}

TEST_F(CmTest, Reject_PeerGetsRejectedWithPrivateData) {
  const uint16_t port = testing::free_tcp_port();
  listen_on(port);
  resolve_to(port);
  const std::string hello = "hello, server";
  rdma_conn_param p{};
  p.private_data = hello.data();
  p.private_data_len = static_cast<uint8_t>(hello.size());
  p.responder_resources = 2;
  p.initiator_depth = 3;
  ASSERT_EQ(connect(client_, &p), 0);
  std::string got;
  const rdma_cm_event req = next(&got);
  ASSERT_EQ(req.event, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(req.listen_id, server_);
  EXPECT_EQ(req.id->context, this);  // a child takes its listener's context
  EXPECT_EQ(req.param.conn.qp_num, client_->qp->qp_num);
  EXPECT_EQ(req.param.conn.responder_resources, 2);
  EXPECT_EQ(req.param.conn.initiator_depth, 3);
  EXPECT_EQ(got, hello);
  child_ = req.id;
  char too_long[149] = {};
  EXPECT_EQ(reject(child_, too_long, sizeof too_long), -1);
  EXPECT_EQ(errno, EINVAL);
  const std::string no = "no thanks";
  ASSERT_EQ(reject(child_, no.data(), static_cast<uint8_t>(no.size())), 0);
  const rdma_cm_event rej = next(&got);
  EXPECT_EQ(rej.event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(rej.id, client_);
  EXPECT_EQ(rej.status, MRC_CM_REJ_CONSUMER_DEFINED);
  EXPECT_EQ(got, no);
  EXPECT_EQ(accept(child_, nullptr), -1);  // rejected already
}

TEST_F(CmTest, ConnectAccept_DataFlows_DisconnectReachesBoth_PortFreed) {
  const uint16_t port = testing::free_tcp_port();
  listen_on(port);
  resolve_to(port);
  ASSERT_EQ(connect(client_, nullptr), 0);
  const rdma_cm_event req = next();
  ASSERT_EQ(req.event, RDMA_CM_EVENT_CONNECT_REQUEST);
  child_ = req.id;
  ASSERT_EQ(child_->verbs, client_->verbs);  // mrc0, this process's one context
  make_qp(child_);
  const std::string welcome = "welcome";
  rdma_conn_param p{};
  p.private_data = welcome.data();
  p.private_data_len = static_cast<uint8_t>(welcome.size());
  ASSERT_EQ(accept(child_, &p), 0) << std::strerror(errno);
  std::string got;
  rdma_cm_event a = next(&got), b = next();
  if (a.id != client_) std::swap(a, b);  // the two ESTABLISHED may come in either order
  EXPECT_EQ(a.event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(a.id, client_);
  EXPECT_EQ(b.event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(b.id, child_);
  for (rdma_cm_id* id : {client_, child_}) {
    ibv_qp_attr at{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(query_qp(id->qp, &at, IBV_QP_STATE | IBV_QP_DEST_QPN, &init), 0);
    EXPECT_EQ(at.qp_state, IBV_QPS_RTS);
    EXPECT_EQ(at.dest_qp_num, (id == client_ ? child_ : client_)->qp->qp_num);
    // The route names both GIDs (the peer's from its REQ / REP): mrc0's, ::1, at both ends.
    const ibv_gid& peer = id->route.addr.addr.ibaddr.dgid;
    const ibv_gid& self = (id == client_ ? child_ : client_)->route.addr.addr.ibaddr.sgid;
    EXPECT_EQ(std::memcmp(peer.raw, self.raw, 16), 0);
    EXPECT_EQ(std::memcmp(peer.raw, &in6addr_loopback, 16), 0);
  }

  // A SEND from the client lands in the server's posted receive.
  send_one(client_->qp, child_->qp);

  // Disconnect: DISCONNECTED at both ends, the QP in ERR; again is harmless.
  ASSERT_EQ(disconnect(client_), 0);
  a = next();
  b = next();
  EXPECT_EQ(a.event, RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(b.event, RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_NE(a.id, b.id);
  ibv_qp_attr at{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(query_qp(client_->qp, &at, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(at.qp_state, IBV_QPS_ERR);
  EXPECT_EQ(disconnect(child_), 0);
  EXPECT_EQ(disconnect(client_), 0);
  // Then TIMEWAIT_EXIT at both ends, once the old connection's packets are gone (the QP's
  // ACK timeout: 67 ms at the default 14).
  a = next();
  b = next();
  EXPECT_EQ(a.event, RDMA_CM_EVENT_TIMEWAIT_EXIT);
  EXPECT_EQ(b.event, RDMA_CM_EVENT_TIMEWAIT_EXIT);
  EXPECT_NE(a.id, b.id);

  // Destroying the listener frees its port: a new listener binds it again.
  destroy_id(server_);
  server_ = nullptr;
  ASSERT_EQ(create_id(ch_, &server_, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in again = loopback(port);
  EXPECT_EQ(bind_addr(server_, reinterpret_cast<sockaddr*>(&again)), 0) << std::strerror(errno);
}

// A listener destroyed while its CONNECT_REQUEST waits unfetched on the channel takes the
// request with it (no event left whose listen_id points at the freed listener; the client
// hears CONNECT_ERROR), and its count leaves the channel's fd (not readable for nothing).
TEST_F(CmTest, DestroyListener_UnfetchedRequestGoes_FdNotLeftReadable) {
  const uint16_t port = testing::free_tcp_port();
  listen_on(port);
  resolve_to(port);
  ASSERT_EQ(connect(client_, nullptr), 0);
  pollfd p{ch_->fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1) << "no CONNECT_REQUEST";
  ASSERT_EQ(destroy_id(server_), 0);
  server_ = nullptr;
  const rdma_cm_event e = next();
  EXPECT_EQ(e.id, client_);
  EXPECT_EQ(e.event, RDMA_CM_EVENT_CONNECT_ERROR);
  EXPECT_EQ(e.listen_id, nullptr);
  p.revents = 0;
  EXPECT_EQ(::poll(&p, 1, 200), 0) << "the fd stays readable with no event to fetch";
}

// Every connection starts at a PSN of its own (the kernel's random source), 24 bits.
TEST_F(CmTest, Psn_RandomPerId24Bits) {
  const uint16_t port = testing::free_tcp_port();
  listen_on(port);
  std::set<uint32_t> psns;
  for (int i = 0; i < 4; ++i) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in dst = loopback(port);
    ASSERT_EQ(resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
    EXPECT_EQ(next().event, RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_EQ(resolve_route(id, 2000), 0);
    EXPECT_EQ(next().event, RDMA_CM_EVENT_ROUTE_RESOLVED);
    make_qp(id);
    ASSERT_EQ(connect(id, nullptr), 0);
    const rdma_cm_event req = next();
    ASSERT_EQ(req.event, RDMA_CM_EVENT_CONNECT_REQUEST);
    // The child's RTR attributes carry the requester's PSN; its RTS ones its own.
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(init_qp_attr(req.id, &a, &mask), 0);
    EXPECT_LT(a.rq_psn, 1u << 24);
    psns.insert(a.rq_psn);
    a.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(init_qp_attr(req.id, &a, &mask), 0);
    EXPECT_LT(a.sq_psn, 1u << 24);
    psns.insert(a.sq_psn);
    EXPECT_EQ(reject(req.id, nullptr, 0), 0);
    EXPECT_EQ(next().event, RDMA_CM_EVENT_REJECTED);
    destroy_id(req.id);
    destroy_qp(id);
    destroy_id(id);
  }
  EXPECT_GE(psns.size(), 7u) << "8 PSNs of 24 random bits: a repeat is a 1 in 10^6 event";
}

TEST_F(CmTest, InitQpAttr_AndEstablish_ForAppMadeQps) {
  const uint16_t port = testing::free_tcp_port();
  listen_on(port);
  resolve_to(port, /*qp=*/false);
  ibv_qp_attr at{};
  int mask = 0;
  at.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(init_qp_attr(client_, &at, &mask), -1);  // the peer is not known yet
  rdma_conn_param p{};
  p.qp_num = 4242;  // a QP the app made itself (rping -q)
  ASSERT_EQ(connect(client_, &p), 0);
  const rdma_cm_event req = next();
  ASSERT_EQ(req.event, RDMA_CM_EVENT_CONNECT_REQUEST);
  child_ = req.id;
  p.qp_num = 4343;
  ASSERT_EQ(accept(child_, &p), 0);
  const rdma_cm_event rep = next();
  ASSERT_EQ(rep.event, RDMA_CM_EVENT_CONNECT_RESPONSE);
  EXPECT_EQ(rep.param.conn.qp_num, 4343u);
  at.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(init_qp_attr(client_, &at, &mask), 0);
  EXPECT_EQ(at.dest_qp_num, 4343u);
  EXPECT_TRUE(mask & IBV_QP_AV);
  EXPECT_EQ(at.ah_attr.is_global, 1);
  ibv_gid gid{};
  ASSERT_EQ(query_gid(client_->verbs, 1, 0, &gid), 0);
  EXPECT_EQ(std::memcmp(at.ah_attr.grh.dgid.raw, gid.raw, 16), 0);  // one process: our GID
  ASSERT_EQ(establish(client_), 0);
  // Only the passive side hears ESTABLISHED (the active one knows: rping -q counts on it).
  const rdma_cm_event est = next();
  EXPECT_EQ(est.event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(est.id, child_);
  expect_no_event();
}

// pyverbs' test_rdmacm_async_traffic_external_qp: QPs the app makes itself with
// ibv_create_qp on the id's PD (librdmacm's device PD, there from address resolution and
// bind on: it was null, and the app's ibv_create_qp(NULL) crashed), connected by qp_num in
// the connection parameters, moved by the app through rdma_init_qp_attr's INIT, RTR and RTS,
// the active side finishing with rdma_establish; data flows over them.
TEST_F(CmTest, ExternalQp_OnTheIdsPd_InitQpAttrToRts_DataFlows) {
  const uint16_t port = testing::free_tcp_port();
  listen_on(port);
  EXPECT_NE(server_->pd, nullptr);
  resolve_to(port, /*qp=*/false);
  ASSERT_NE(client_->pd, nullptr);
  EXPECT_EQ(client_->pd->context, client_->verbs);
  ibv_qp* qa = app_qp(client_);
  ASSERT_NE(qa, nullptr) << std::strerror(errno);
  rdma_conn_param p{};
  p.qp_num = qa->qp_num;
  ASSERT_EQ(connect(client_, &p), 0);
  const rdma_cm_event req = next();
  ASSERT_EQ(req.event, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(req.param.conn.qp_num, qa->qp_num);
  child_ = req.id;
  ASSERT_NE(child_->pd, nullptr);  // a child has its listener's PD
  ibv_qp* qb = app_qp(child_);
  ASSERT_NE(qb, nullptr) << std::strerror(errno);
  to_rts(child_, qb);
  p.qp_num = qb->qp_num;
  ASSERT_EQ(accept(child_, &p), 0) << std::strerror(errno);
  const rdma_cm_event rep = next();
  ASSERT_EQ(rep.event, RDMA_CM_EVENT_CONNECT_RESPONSE);
  EXPECT_EQ(rep.param.conn.qp_num, qb->qp_num);
  to_rts(client_, qa);
  ASSERT_EQ(establish(client_), 0);
  const rdma_cm_event est = next();
  EXPECT_EQ(est.event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(est.id, child_);
  for (auto [qp, peer] : {std::pair{qa, qb}, std::pair{qb, qa}}) {
    ibv_qp_attr at{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(query_qp(qp, &at, IBV_QP_STATE | IBV_QP_DEST_QPN, &init), 0);
    EXPECT_EQ(at.qp_state, IBV_QPS_RTS);
    EXPECT_EQ(at.dest_qp_num, peer->qp_num);
  }
  send_one(qa, qb);
  send_one(qb, qa);
}

// RDMA_PS_UDP: rdma_create_qp makes a UD QP at RTS (Q_Key RDMA_UDP_QKEY); the REQ names the
// active QP (CONNECT_REQUEST's param.ud), the accept's REP the passive one (ESTABLISHED's
// param.ud with the AH attributes and the private data), and the passive side hears nothing
// more; a datagram sent with those reaches the passive QP. No connection: disconnect is EINVAL.
TEST_F(CmTest, UdpPortSpace_ReplyNamesThePeersUdQp_DatagramFlows) {
  const uint16_t port = testing::free_tcp_port();
  listen_on(port, RDMA_PS_UDP);
  resolve_to(port, /*qp=*/true, RDMA_PS_UDP);
  ibv_qp_attr at{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(query_qp(client_->qp, &at, IBV_QP_QKEY, &init), 0);
  EXPECT_EQ(at.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));
  ASSERT_EQ(connect(client_, nullptr), 0) << std::strerror(errno);
  const rdma_cm_event req = next();
  ASSERT_EQ(req.event, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(req.param.ud.qp_num, client_->qp->qp_num);
  child_ = req.id;
  EXPECT_EQ(child_->qp_type, IBV_QPT_UD);
  EXPECT_EQ(child_->ps, RDMA_PS_UDP);
  make_qp(child_);
  char too_long[137] = {};  // a reply to an RDMA_PS_UDP request carries 136 bytes
  rdma_conn_param p{};
  p.private_data = too_long;
  p.private_data_len = sizeof too_long;
  EXPECT_EQ(accept(child_, &p), -1);
  EXPECT_EQ(errno, EINVAL);
  const std::string welcome = "ud welcome";
  p.private_data = welcome.data();
  p.private_data_len = static_cast<uint8_t>(welcome.size());
  ASSERT_EQ(accept(child_, &p), 0) << std::strerror(errno);
  std::string got;
  const rdma_cm_event est = next(&got);
  ASSERT_EQ(est.event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(est.id, client_);
  EXPECT_EQ(got, welcome);
  EXPECT_EQ(est.param.ud.qp_num, child_->qp->qp_num);
  EXPECT_EQ(est.param.ud.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));
  ibv_gid gid{};
  ASSERT_EQ(query_gid(client_->verbs, 1, 0, &gid), 0);
  EXPECT_EQ(est.param.ud.ah_attr.is_global, 1);
  EXPECT_EQ(std::memcmp(est.param.ud.ah_attr.grh.dgid.raw, gid.raw, 16), 0);  // one process
  expect_no_event();  // the passive side hears no ESTABLISHED
  ibv_ah_attr aa = est.param.ud.ah_attr;
  ibv_ah* ah = create_ah(client_->qp->pd, &aa);
  ASSERT_NE(ah, nullptr) << std::strerror(errno);
  send_one(client_->qp, child_->qp, ah, est.param.ud.qp_num);
  destroy_ah(ah);
  EXPECT_EQ(disconnect(client_), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(establish(client_), -1);
}

// Multicast on an RDMA_PS_UDP id: bound, it resolves a multicast address (ADDR_RESOLVED; the
// bound address stays), joins with its QP attached: MULTICAST_JOIN carries the join's context
// and what a SEND to the group needs (the group's GID, QPN 0xFFFFFF, RDMA_UDP_QKEY), and the
// id's own QP receives such a SEND (this process is a member). Bad input: a unicast address,
// joining twice, unknown comp_mask bits, leaving a group not joined.
TEST_F(CmTest, JoinMulticast_EventNamesTheGroup_SendReachesTheIdsQp_Leave) {
  ASSERT_EQ(create_id(ch_, &client_, nullptr, RDMA_PS_UDP), 0);
  sockaddr_in src = loopback(0);
  ASSERT_EQ(bind_addr(client_, reinterpret_cast<sockaddr*>(&src)), 0) << std::strerror(errno);
  const uint16_t bound_port = ntohs(get_src_port(client_));
  sockaddr_in group{};
  group.sin_family = AF_INET;
  ASSERT_EQ(::inet_pton(AF_INET, "230.0.0.9", &group.sin_addr), 1);
  ASSERT_EQ(resolve_addr(client_, reinterpret_cast<sockaddr*>(&src),
                         reinterpret_cast<sockaddr*>(&group), 2000),
            0)
      << std::strerror(errno);
  EXPECT_EQ(next().event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(ntohs(get_src_port(client_)), bound_port);
  make_qp(client_);
  sockaddr_in unicast = loopback(7);
  EXPECT_EQ(join_multicast(client_, reinterpret_cast<sockaddr*>(&unicast), nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  int tag = 0;
  ASSERT_EQ(join_multicast(client_, reinterpret_cast<sockaddr*>(&group), &tag), 0)
      << std::strerror(errno);
  pollfd p{ch_->fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(get_cm_event(ch_, &e), 0);
  ASSERT_EQ(e->event, RDMA_CM_EVENT_MULTICAST_JOIN);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(e->param.ud.private_data, &tag);
  EXPECT_EQ(e->param.ud.qp_num, 0xFFFFFFu);
  EXPECT_EQ(e->param.ud.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));
  ibv_ah_attr aa = e->param.ud.ah_attr;
  ack_cm_event(e);
  const uint8_t mgid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 230, 0, 0, 9};
  EXPECT_EQ(aa.is_global, 1);
  EXPECT_EQ(std::memcmp(aa.grh.dgid.raw, mgid, 16), 0);
  EXPECT_EQ(join_multicast(client_, reinterpret_cast<sockaddr*>(&group), nullptr), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  rdma_cm_join_mc_attr_ex ex{};
  ex.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_RESERVED;
  ex.addr = reinterpret_cast<sockaddr*>(&group);
  EXPECT_EQ(join_multicast_ex(client_, &ex, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  ibv_ah* ah = create_ah(client_->qp->pd, &aa);
  ASSERT_NE(ah, nullptr) << std::strerror(errno);
  send_one(client_->qp, client_->qp, ah, 0xFFFFFF);
  destroy_ah(ah);
  EXPECT_EQ(leave_multicast(client_, reinterpret_cast<sockaddr*>(&group)), 0);
  EXPECT_EQ(leave_multicast(client_, reinterpret_cast<sockaddr*>(&group)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  // A send-only full member joins without its QP: the event comes all the same.
  ex.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  ex.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
  ASSERT_EQ(join_multicast_ex(client_, &ex, nullptr), 0) << std::strerror(errno);
  EXPECT_EQ(next().event, RDMA_CM_EVENT_MULTICAST_JOIN);
  EXPECT_EQ(leave_multicast(client_, reinterpret_cast<sockaddr*>(&group)), 0);
}

// An RDMA_PS_UDP request the passive side rejects is UNREACHABLE at the active side (status
// MRC_CM_SIDR_REJECT, with the reject's private data), as the kernel's CM reports a SIDR
// reject; an RDMA_PS_TCP request to an RDMA_PS_UDP listener is REJECTED without the app
// hearing of it.
TEST_F(CmTest, UdpPortSpace_RejectIsUnreachable_TcpRequestToUdpListenerRejected) {
  const uint16_t port = testing::free_tcp_port();
  listen_on(port, RDMA_PS_UDP);
  resolve_to(port, /*qp=*/true, RDMA_PS_UDP);
  ASSERT_EQ(connect(client_, nullptr), 0);
  const rdma_cm_event req = next();
  ASSERT_EQ(req.event, RDMA_CM_EVENT_CONNECT_REQUEST);
  child_ = req.id;
  const std::string no = "no thanks";
  ASSERT_EQ(reject(child_, no.data(), static_cast<uint8_t>(no.size())), 0);
  std::string got;
  const rdma_cm_event rej = next(&got);
  EXPECT_EQ(rej.event, RDMA_CM_EVENT_UNREACHABLE);
  EXPECT_EQ(rej.status, MRC_CM_SIDR_REJECT);
  EXPECT_EQ(got, no);
  destroy_qp(client_);
  destroy_id(client_);
  client_ = nullptr;
  resolve_to(port);  // RDMA_PS_TCP
  ASSERT_EQ(connect(client_, nullptr), 0);
  const rdma_cm_event tcp = next();
  EXPECT_EQ(tcp.event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(tcp.id, client_);
  expect_no_event();
}

// rdma_create_ep ids are synchronous: connect and accept return once established;
// rdma_get_request hands out the next request with its QP made; the QPs got CQs of their own.
// Each id keeps its last event in id->event, where programs read the peer's private data.
TEST(CmSync, CreateEp_GetRequest_ConnectAccept) {
  ASSERT_TRUE(env_set);
  const std::string port = std::to_string(testing::free_tcp_port());
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  rdma_addrinfo *passive = nullptr, *active = nullptr;
  ASSERT_EQ(getaddrinfo("127.0.0.1", port.c_str(), &hints, &passive), 0);
  ASSERT_EQ(getaddrinfo("127.0.0.1", port.c_str(), nullptr, &active), 0);
  ibv_qp_init_attr attr{};
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  rdma_cm_id *listener = nullptr, *server = nullptr, *client = nullptr;
  ASSERT_EQ(create_ep(&listener, passive, nullptr, &attr), 0) << std::strerror(errno);
  ASSERT_EQ(listen(listener, 4), 0);
  int accepted = -1;
  std::string request_data;
  std::thread srv([&] {
    if (get_request(listener, &server) != 0) return;
    if (server->event && server->event->event == RDMA_CM_EVENT_CONNECT_REQUEST)
      request_data.assign(static_cast<const char*>(server->event->param.conn.private_data),
                          server->event->param.conn.private_data_len);
    rdma_conn_param rep{};
    rep.private_data = "rep";
    rep.private_data_len = 3;
    accepted = accept(server, &rep);
  });
  ibv_qp_init_attr cattr = attr;
  ASSERT_EQ(create_ep(&client, active, nullptr, &cattr), 0) << std::strerror(errno);
  ASSERT_NE(client->qp, nullptr);
  EXPECT_NE(client->send_cq_channel, nullptr);
  EXPECT_NE(client->recv_cq, nullptr);
  rdma_conn_param req{};
  req.private_data = "request";
  req.private_data_len = 7;
  EXPECT_EQ(connect(client, &req), 0) << std::strerror(errno);  // returns established
  srv.join();
  EXPECT_EQ(accepted, 0);
  EXPECT_EQ(request_data, "request");
  ASSERT_NE(client->event, nullptr);
  EXPECT_EQ(client->event->event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(std::string(static_cast<const char*>(client->event->param.conn.private_data),
                        client->event->param.conn.private_data_len),
            "rep");
  ASSERT_NE(server->event, nullptr);
  EXPECT_EQ(server->event->event, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(server, nullptr);
  ASSERT_NE(server->qp, nullptr);
  EXPECT_NE(server->recv_cq_channel, nullptr);
  ibv_qp_attr at{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(query_qp(client->qp, &at, IBV_QP_DEST_QPN, &init), 0);
  EXPECT_EQ(at.dest_qp_num, server->qp->qp_num);
  EXPECT_EQ(disconnect(client), 0);
  destroy_ep(client);
  destroy_ep(server);
  destroy_ep(listener);
  freeaddrinfo(passive);
  freeaddrinfo(active);
}

TEST_F(CmTest, MigrateId_EventsFollowTheId) {
  ASSERT_EQ(create_id(ch_, &client_, nullptr, RDMA_PS_TCP), 0);
  rdma_event_channel* other = create_event_channel();
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(migrate_id(client_, other), 0);
  EXPECT_EQ(client_->channel, other);
  sockaddr_in dst = loopback(testing::free_tcp_port());
  ASSERT_EQ(resolve_addr(client_, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  pollfd p[2] = {{ch_->fd, POLLIN, 0}, {other->fd, POLLIN, 0}};
  ASSERT_EQ(::poll(p, 2, 5000), 1);
  EXPECT_TRUE(p[1].revents & POLLIN);  // on the new channel, not the old one
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(get_cm_event(other, &e), 0);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  ack_cm_event(e);
  // NULL: a channel of the id's own, which goes with the id.
  ASSERT_EQ(migrate_id(client_, nullptr), 0);
  EXPECT_NE(client_->channel, other);
  EXPECT_NE(client_->channel, ch_);
  destroy_event_channel(other);
}

TEST_F(CmTest, SetOption_TakesWhatAppliesRefusesTheRest) {
  ASSERT_EQ(create_id(ch_, &client_, nullptr, RDMA_PS_TCP), 0);
  uint8_t timeout = 16;
  EXPECT_EQ(set_option(client_, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, 1), 0);
  int on = 1;
  EXPECT_EQ(set_option(client_, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof on), 0);
  EXPECT_EQ(set_option(client_, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof on), 0);
  uint8_t tos = 32;  // DSCP 8: the QP's address vector carries it (its datagrams' class)
  EXPECT_EQ(set_option(client_, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1), 0);
  EXPECT_EQ(set_option(client_, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &tos, 1), -1);
  EXPECT_EQ(errno, EINVAL);
}

// A child of fork() has no service thread: it gets one of its own at its next call, so its
// rdma_cm calls work (rdma_destroy_id of a listener waits for a service round: it hung).
TEST_F(CmTest, Fork_ChildGetsAServiceOfItsOwn_ParentsListenerLives) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer kills a child of a multi-threaded fork() that starts a thread ("not
  // supported"): the release and ASan runs cover this.
  GTEST_SKIP() << "ThreadSanitizer does not support threads started after a multi-threaded fork";
#endif
#if defined(__SANITIZE_ADDRESS__)
  // ASan's allocator takes no lock around fork(): when the parent's service thread is inside
  // it at the fork, the child's first allocation waits forever on the copied lock (gdb of a
  // hung child: its new service thread in SizeClassAllocator64::GetFromAllocator's mutex,
  // destroy_id waiting for it). CI's ASan stage hung so once; under two CPU hogs 19 of 30
  // runs did, release 0 of 15. The release run covers this.
  GTEST_SKIP() << "ASan's allocator is not fork-safe in a multi-threaded parent";
#endif
  const uint16_t port = testing::free_tcp_port();
  listen_on(port);  // a polled socket in the parent: the service is running
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(10);  // a hang ends the child with SIGALRM
    rdma_event_channel* ch = create_event_channel();
    rdma_cm_id* id = nullptr;
    if (!ch || create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) ::_exit(2);
    sockaddr_in a = loopback(testing::free_tcp_port());
    if (bind_addr(id, reinterpret_cast<sockaddr*>(&a)) != 0 || listen(id, 1) != 0) ::_exit(3);
    if (destroy_id(id) != 0) ::_exit(4);
    ::_exit(0);
  }
  int status = -1;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "the child hung (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's listener still takes connections.
  resolve_to(port);
  ASSERT_EQ(connect(client_, nullptr), 0);
  const rdma_cm_event req = next();
  EXPECT_EQ(req.event, RDMA_CM_EVENT_CONNECT_REQUEST);
  child_ = req.id;
}

TEST(CmAddrinfo, GetAddrinfo_PassiveAndActive) {
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(getaddrinfo("127.0.0.1", "7174", nullptr, &res), 0);
  ASSERT_NE(res->ai_dst_addr, nullptr);
  EXPECT_EQ(res->ai_src_addr, nullptr);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  EXPECT_EQ(ntohs(reinterpret_cast<sockaddr_in*>(res->ai_dst_addr)->sin_port), 7174);
  freeaddrinfo(res);
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  ASSERT_EQ(getaddrinfo(nullptr, "7174", &hints, &res), 0);
  EXPECT_NE(res->ai_src_addr, nullptr);
  EXPECT_EQ(res->ai_dst_addr, nullptr);
  freeaddrinfo(res);
  hints.ai_port_space = RDMA_PS_UDP;  // UD QPs
  ASSERT_EQ(getaddrinfo(nullptr, "7174", &hints, &res), 0);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_UDP);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_UD);
  freeaddrinfo(res);
  hints.ai_port_space = RDMA_PS_IB;
  EXPECT_NE(getaddrinfo(nullptr, "7174", &hints, &res), 0);
  EXPECT_EQ(errno, EPROTONOSUPPORT);
  EXPECT_STREQ(event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT), "RDMA_CM_EVENT_TIMEWAIT_EXIT");
  EXPECT_STREQ(event_str(static_cast<rdma_cm_event_type>(99)), "UNKNOWN EVENT");
}

// As librdmacm: a source address in the hints comes back as the result's, with the
// destination resolved, or alone (pyverbs' AddrInfo(src=, dst=) and AddrInfo(src=)).
TEST(CmAddrinfo, GetAddrinfo_HintsSourceComesBack) {
  sockaddr_in src = loopback(4242);
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_UDP;
  hints.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
  hints.ai_src_len = sizeof src;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(getaddrinfo("230.0.0.1", "7174", &hints, &res), 0);
  ASSERT_NE(res->ai_src_addr, nullptr);
  ASSERT_NE(res->ai_dst_addr, nullptr);
  EXPECT_EQ(std::memcmp(res->ai_src_addr, &src, sizeof src), 0);
  freeaddrinfo(res);
  ASSERT_EQ(getaddrinfo(nullptr, nullptr, &hints, &res), 0);
  ASSERT_NE(res->ai_src_addr, nullptr);
  EXPECT_EQ(res->ai_dst_addr, nullptr);
  EXPECT_EQ(res->ai_src_len, sizeof src);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_UD);
  freeaddrinfo(res);
  EXPECT_EQ(getaddrinfo(nullptr, nullptr, nullptr, &res), -1);  // nothing to resolve
  EXPECT_EQ(errno, EINVAL);
}

}  // namespace
}  // namespace mrc::verbs::cm

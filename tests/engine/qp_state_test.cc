// QP state machine: allowed transitions, required attributes, flush on error.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mrc/engine/engine.h"

namespace mrc::engine {
namespace {

// A new QP of `e` on `cq` (send and receive), moved to INIT.
Qpn qp_in_init(Engine& e, CqId cq) {
  QpInit init;
  init.send_cq = init.recv_cq = cq;
  const Qpn n = e.create_qp(init).value();
  QpAttr a;
  a.state = QpState::kInit;
  EXPECT_TRUE(e.modify_qp(n, a, attr::kState).ok());
  return n;
}

struct Fixture : ::testing::Test {
  Engine e;
  CqId cq = e.create_cq(64).value();
  Qpn q = [this] {
    QpInit init;
    init.send_cq = init.recv_cq = cq;
    return e.create_qp(init).value();
  }();
  Status<Error> to(QpState s, uint32_t extra = 0, QpAttr a = {}) {
    a.state = s;
    return e.modify_qp(q, a, attr::kState | extra);
  }
  QpAttr rtr_attr() {
    QpAttr a;
    a.dest_qpn = 5;
    a.paths = {Path{1, 0}};
    return a;
  }
};

using QpState_ = Fixture;

TEST_F(QpState_, Transition_NormalPath) {
  EXPECT_EQ(e.query_qp(q)->state, QpState::kReset);
  ASSERT_TRUE(to(QpState::kInit).ok());
  ASSERT_TRUE(to(QpState::kRtr, attr::kDest | attr::kPaths, rtr_attr()).ok());
  ASSERT_TRUE(to(QpState::kRts).ok());
  ASSERT_TRUE(to(QpState::kSqd).ok());
  ASSERT_TRUE(to(QpState::kRts).ok());
  EXPECT_EQ(e.query_qp(q)->state, QpState::kRts);
}

TEST_F(QpState_, Transition_SkippingStatesRefused) {
  EXPECT_EQ(to(QpState::kRtr).error(), Error::kBadState);
  EXPECT_EQ(to(QpState::kRts).error(), Error::kBadState);
  ASSERT_TRUE(to(QpState::kInit).ok());
  EXPECT_EQ(to(QpState::kRts).error(), Error::kBadState);
}

TEST(QpState, SendsIn_RtsAndSqdOnly) {
  for (QpState s : {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kError})
    EXPECT_FALSE(sends_in(s)) << to_string(s);
  EXPECT_TRUE(sends_in(QpState::kRts));
  EXPECT_TRUE(sends_in(QpState::kSqd));
}

TEST(QpState, ConnectedIn_RtrRtsAndSqdOnly) {
  for (QpState s : {QpState::kReset, QpState::kInit, QpState::kError})
    EXPECT_FALSE(connected_in(s)) << to_string(s);
  for (QpState s : {QpState::kRtr, QpState::kRts, QpState::kSqd})
    EXPECT_TRUE(connected_in(s)) << to_string(s);
}

TEST(QpState, TakesSendsIn_RtsSqdAndErrorOnly) {
  for (QpState s : {QpState::kReset, QpState::kInit, QpState::kRtr})
    EXPECT_FALSE(takes_sends_in(s)) << to_string(s);
  for (QpState s : {QpState::kRts, QpState::kSqd, QpState::kError})
    EXPECT_TRUE(takes_sends_in(s)) << to_string(s);
}

TEST(QpState, ConfigurableIn_AllButResetAndError) {
  for (QpState s : {QpState::kReset, QpState::kError})
    EXPECT_FALSE(configurable_in(s)) << to_string(s);
  for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts, QpState::kSqd})
    EXPECT_TRUE(configurable_in(s)) << to_string(s);
}

// Each helper is the engine's own rule: a post is refused exactly where takes_sends_in says
// no, and a modify without a state change exactly where configurable_in says no.
TEST_F(QpState_, Helpers_MatchTheEngine) {
  auto check = [&] {
    const QpState s = e.query_qp(q)->state;
    SendWr wr;
    wr.opcode = Opcode::kSend;
    const auto posted = e.post_send(q, wr);
    EXPECT_EQ(posted.ok() || posted.error() != Error::kBadState, takes_sends_in(s)) << to_string(s);
    QpAttr a;
    a.timeout = 10;
    EXPECT_EQ(e.modify_qp(q, a, attr::kTimeout).ok(), configurable_in(s)) << to_string(s);
  };
  check();  // RESET
  ASSERT_TRUE(to(QpState::kInit).ok());
  check();
  ASSERT_TRUE(to(QpState::kRtr, attr::kDest | attr::kPaths, rtr_attr()).ok());
  check();
  ASSERT_TRUE(to(QpState::kRts).ok());
  check();
  ASSERT_TRUE(to(QpState::kSqd).ok());
  check();
  ASSERT_TRUE(to(QpState::kError).ok());
  check();
}

// The plane limit (kMaxPlanes) at its edge: the last plane is taken, the next one refused
// with the field named, and the QP stays in INIT.
TEST_F(QpState_, Rtr_PlaneBeyondLimitRefused) {
  ASSERT_TRUE(to(QpState::kInit).ok());
  QpAttr a = rtr_attr();
  a.paths = {Path{1, static_cast<uint16_t>(kMaxPlanes - 1)}, Path{2, kMaxPlanes}};
  a.state = QpState::kRtr;
  const auto refused = e.check_modify_qp(q, a, attr::kState | attr::kDest | attr::kPaths);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().error, Error::kInvalidArgument);
  EXPECT_STREQ(refused.error().field, "paths");
  EXPECT_EQ(to(QpState::kRtr, attr::kDest | attr::kPaths, a).error(), Error::kInvalidArgument);
  EXPECT_EQ(e.query_qp(q)->state, QpState::kInit);
  a.paths.pop_back();
  ASSERT_TRUE(to(QpState::kRtr, attr::kDest | attr::kPaths, a).ok());
  EXPECT_EQ(e.set_plane_drained(kMaxPlanes, true).error(), Error::kInvalidArgument);
  EXPECT_TRUE(e.set_plane_drained(kMaxPlanes - 1, true).ok());
  EXPECT_EQ(e.drained_planes(), 1u << (kMaxPlanes - 1));
}

TEST_F(QpState_, Rtr_NeedsDestinationAndPaths) {
  ASSERT_TRUE(to(QpState::kInit).ok());
  EXPECT_EQ(to(QpState::kRtr).error(), Error::kInvalidArgument);
  QpAttr a = rtr_attr();
  a.paths.clear();
  EXPECT_EQ(to(QpState::kRtr, attr::kDest | attr::kPaths, a).error(), Error::kInvalidArgument);
}

TEST_F(QpState_, Attributes_RangeChecked) {
  ASSERT_TRUE(to(QpState::kInit).ok());
  QpAttr a;
  a.timeout = 32;
  EXPECT_EQ(e.modify_qp(q, a, attr::kTimeout).error(), Error::kInvalidArgument);
  a = {};
  a.retry_cnt_linear = 8;
  EXPECT_EQ(e.modify_qp(q, a, attr::kRetry).error(), Error::kInvalidArgument);
  a = {};
  a.retry_cnt_exp = 26;
  EXPECT_EQ(e.modify_qp(q, a, attr::kRetry).error(), Error::kInvalidArgument);
  a = {};
  a.max_psn_range = 0;
  EXPECT_EQ(e.modify_qp(q, a, attr::kMpr).error(), Error::kInvalidArgument);
  a = {};
  a.mtu = 16384;
  EXPECT_EQ(e.modify_qp(q, a, attr::kMtu).error(), Error::kInvalidArgument);
  a.mtu = 3000;
  EXPECT_EQ(e.modify_qp(q, a, attr::kMtu).error(), Error::kInvalidArgument);
  a.mtu = 8192;  // past IB's largest: a jumbo link's payload (wire::kMaxPayload)
  EXPECT_TRUE(e.modify_qp(q, a, attr::kMtu).ok());
  a = {};
  a.retry_cnt_exp = 25;
  EXPECT_TRUE(e.modify_qp(q, a, attr::kRetry).ok());
}

TEST_F(QpState_, Error_FlushesPostedReceives) {
  std::vector<uint8_t> buf(64);
  uint32_t key = e.register_mr(buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()),
                               access::kLocalWrite)
                     .value();
  ASSERT_TRUE(to(QpState::kInit).ok());
  Sge s{reinterpret_cast<uint64_t>(buf.data()), 64, key};
  ASSERT_TRUE(e.post_recv(q, RecvWr{11, {&s, 1}}).ok());
  ASSERT_TRUE(to(QpState::kError).ok());
  Completion c[4];
  ASSERT_EQ(e.poll_cq(cq, c), 1u);
  EXPECT_EQ(c[0].wr_id, 11u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  // Posting in ERROR completes at once with a flush error.
  ASSERT_TRUE(e.post_recv(q, RecvWr{12, {&s, 1}}).ok());
  ASSERT_EQ(e.poll_cq(cq, c), 1u);
  EXPECT_EQ(c[0].wr_id, 12u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  // ERROR -> RESET -> INIT works again.
  ASSERT_TRUE(to(QpState::kReset).ok());
  ASSERT_TRUE(to(QpState::kInit).ok());
}

// RESET takes the QP's completions not yet polled out of its CQ (as rdma-core providers clean
// a CQ), and only its own: a QP restarted after an error does not poll its old flushes.
TEST_F(QpState_, Reset_DropsItsUnpolledCompletionsOnly) {
  const Qpn other = qp_in_init(e, cq);
  ASSERT_TRUE(to(QpState::kInit).ok());
  std::vector<uint8_t> buf(64);
  const uint32_t key =
      e.register_mr(buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()), 1).value();
  Sge s{reinterpret_cast<uint64_t>(buf.data()), 64, key};
  ASSERT_TRUE(e.post_recv(q, RecvWr{1, {&s, 1}}).ok());
  ASSERT_TRUE(e.post_recv(other, RecvWr{2, {&s, 1}}).ok());
  ASSERT_TRUE(to(QpState::kError).ok());
  QpAttr err;
  err.state = QpState::kError;
  ASSERT_TRUE(e.modify_qp(other, err, attr::kState).ok());
  ASSERT_EQ(e.cq_depth(cq), 2u);  // both flushes
  ASSERT_TRUE(to(QpState::kReset).ok());
  Completion c[4];
  ASSERT_EQ(e.poll_cq(cq, c), 1u);
  EXPECT_EQ(c[0].wr_id, 2u);
  EXPECT_EQ(c[0].qpn, other);
}

TEST_F(QpState_, PostSend_BeforeRtsRefused) {
  SendWr wr;
  EXPECT_EQ(e.post_send(q, wr).error(), Error::kBadState);
}

TEST_F(QpState_, DestroyCq_InUseRefused) {
  EXPECT_EQ(e.destroy_cq(cq).error(), Error::kBadState);
  ASSERT_TRUE(e.destroy_qp(q).ok());
  EXPECT_TRUE(e.destroy_cq(cq).ok());
}

// Everything query_qp, qp_stats, path_stats and cc_config say of a QP, for before/after checks.
std::string snapshot(const Engine& e, Qpn q) {
  std::string out;
  auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  auto put_u = [&](uint64_t v) { put(&v, sizeof v); };
  const QpAttr a = e.query_qp(q).value();
  for (uint64_t v : {uint64_t(a.state), uint64_t(a.mtu), uint64_t(a.sq_psn), uint64_t(a.rq_psn),
                     uint64_t(a.peer), uint64_t(a.dest_qpn), uint64_t(a.remote_token),
                     uint64_t(a.local_token), uint64_t(a.timeout), uint64_t(a.retry_cnt_linear),
                     uint64_t(a.retry_cnt_exp), uint64_t(a.rnr_retry), uint64_t(a.max_psn_range),
                     uint64_t(a.max_wimm), uint64_t(a.max_wimm_dest), uint64_t(a.access),
                     a.cc_rates.init_mbps, a.cc_rates.min_mbps, a.cc_rates.max_mbps})
    put_u(v);
  put_u(a.min_rnr_timer);
  for (const auto* list : {&a.paths, &a.backup_paths}) {
    put_u(list->size());
    for (const Path& p : *list) put_u(uint64_t{p.ev} << 16 | p.plane);
  }
  const PathPolicy& pp = a.path_policy;
  for (uint64_t v :
       {uint64_t(pp.min_active_per_plane), uint64_t(pp.loss_threshold), uint64_t(pp.probes_to_good),
        uint64_t(pp.probe_interval.count()), uint64_t(pp.probe_interval_max.count())})
    put_u(v);
  put(pp.plane_weight, sizeof pp.plane_weight);
  put_u(a.cc.has_value());
  if (a.cc) put_u(a.cc->base_rtt);
  put(e.qp_stats(q), sizeof(QpStats));
  for (const PathStats& ps : e.path_stats(q)) put(&ps, sizeof ps);
  const auto cc = e.cc_config(q);
  put_u(cc.has_value());
  if (cc) put_u(cc->base_rtt);
  return out;
}

// A modify of many fields that is refused for its last one (check_modify's order) leaves the
// QP exactly as it was, and says which field.
TEST_F(QpState_, ModifyQp_RefusedForLastFieldChangesNothing) {
  ASSERT_TRUE(to(QpState::kInit).ok());
  ASSERT_TRUE(to(QpState::kRtr, attr::kDest | attr::kPaths, rtr_attr()).ok());
  ASSERT_TRUE(to(QpState::kRts).ok());
  const std::string before = snapshot(e, q);
  QpAttr a;
  a.mtu = 1024;
  a.timeout = 20;
  a.retry_cnt_linear = 3;
  a.retry_cnt_exp = 5;
  a.rnr_retry = 2;
  a.min_rnr_timer = 0;
  a.max_psn_range = 512;
  a.access = access::kRemoteWrite;
  a.max_wimm = a.max_wimm_dest = 8;
  a.cc = NsccConfig{};
  a.cc_rates.max_mbps = 1000;
  a.paths = {Path{7, 1}, Path{8, 2}};
  a.path_policy.loss_threshold = 0;  // the last field checked: refused
  const uint32_t mask = attr::kMtu | attr::kTimeout | attr::kRetry | attr::kRnrRetry |
                        attr::kMinRnrTimer | attr::kMpr | attr::kAccess | attr::kWimm | attr::kCc |
                        attr::kCcRates | attr::kPaths | attr::kPathPolicy | attr::kState;
  a.state = QpState::kSqd;
  auto why = e.check_modify_qp(q, a, mask);
  ASSERT_FALSE(why.ok());
  EXPECT_EQ(why.error().error, Error::kInvalidArgument);
  EXPECT_STREQ(why.error().field, "path_policy");
  EXPECT_EQ(e.modify_qp(q, a, mask).error(), Error::kInvalidArgument);
  EXPECT_EQ(snapshot(e, q), before);
  // The same call with a good policy goes through and changes what it names.
  a.path_policy = PathPolicy{};
  ASSERT_TRUE(e.check_modify_qp(q, a, mask).ok());
  ASSERT_TRUE(e.modify_qp(q, a, mask).ok());
  EXPECT_NE(snapshot(e, q), before);
  EXPECT_EQ(e.query_qp(q)->state, QpState::kSqd);
  EXPECT_EQ(e.query_qp(q)->timeout, 20);
  EXPECT_EQ(e.query_qp(q)->min_rnr_timer, 0);
  EXPECT_EQ(e.query_qp(q)->paths.size(), 2u);
}

TEST_F(QpState_, CheckModifyQp_NamesTheField) {
  ASSERT_TRUE(to(QpState::kInit).ok());
  struct Case {
    uint32_t mask;
    void (*set)(QpAttr&);
    const char* field;
  };
  const Case cases[] = {
      {attr::kMtu, [](QpAttr& a) { a.mtu = 16384; }, "mtu"},
      {attr::kTimeout, [](QpAttr& a) { a.timeout = 32; }, "timeout"},
      {attr::kRetry, [](QpAttr& a) { a.retry_cnt_linear = 8; }, "retry_cnt_linear"},
      {attr::kRetry, [](QpAttr& a) { a.retry_cnt_exp = 26; }, "retry_cnt_exp"},
      {attr::kRnrRetry, [](QpAttr& a) { a.rnr_retry = 8; }, "rnr_retry"},
      {attr::kMinRnrTimer, [](QpAttr& a) { a.min_rnr_timer = 32; }, "min_rnr_timer"},
      {attr::kMpr, [](QpAttr& a) { a.max_psn_range = 0; }, "max_psn_range"},
      {attr::kPaths,
       [](QpAttr& a) {
         a.paths = {Path{1, 16}};
       },
       "paths"},
      {attr::kPaths,
       [](QpAttr& a) {
         a.paths = {Path{1, 0}, Path{1, 1}};
       },
       "paths"},
      {attr::kPathPolicy, [](QpAttr& a) { a.path_policy.probes_to_good = 0; }, "path_policy"},
      {attr::kPathPolicy, [](QpAttr& a) { a.path_policy.relapse_window = Duration{-1}; },
       "path_policy"},
      {attr::kPathPolicy,
       [](QpAttr& a) { a.path_policy.probe_interval_max = Duration{61'000'000'000}; },
       "path_policy"},
      {attr::kPathPolicy, [](QpAttr& a) { a.path_policy.probe_interval = Duration{INT64_MAX}; },
       "path_policy"},
      {attr::kPathPolicy,
       [](QpAttr& a) { a.path_policy.relapse_window = Duration{61'000'000'000}; }, "path_policy"},
      {attr::kState, [](QpAttr& a) { a.state = QpState::kRts; }, "state"},
      {attr::kState | attr::kPaths,
       [](QpAttr& a) {
         a.state = QpState::kRtr;
         a.paths = {{1, 0}};
       },
       "peer"},
  };
  for (const Case& c : cases) {
    QpAttr a;
    c.set(a);
    auto why = e.check_modify_qp(q, a, c.mask);
    ASSERT_FALSE(why.ok()) << c.field;
    EXPECT_STREQ(why.error().field, c.field);
  }
  EXPECT_STREQ(e.check_modify_qp(q + 100, QpAttr{}, 0).error().field, "qpn");
  EXPECT_EQ(e.check_modify_qp(q + 100, QpAttr{}, 0).error().error, Error::kNoSuchQp);
}

// connect_qp checks RTR and RTS before either applies: a PSN range past the receive window,
// which only the RTS step refuses, leaves the QP in INIT as it was.
TEST_F(QpState_, ConnectQp_RefusedChangesNothing) {
  EngineConfig cfg;
  cfg.recv_window = 512;  // below QpAttr's default max_psn_range (1024)
  Engine small(cfg);
  const Qpn n = qp_in_init(small, small.create_cq(8).value());
  const std::string before = snapshot(small, n);
  QpAttr a = rtr_attr();
  a.sq_psn = 77;
  const uint32_t mask = attr::kDest | attr::kPaths | attr::kSqPsn | attr::kTimeout;
  a.timeout = 9;
  auto why = small.connect_qp(n, a, mask);
  ASSERT_FALSE(why.ok());
  EXPECT_STREQ(why.error().field, "max_psn_range");
  EXPECT_EQ(snapshot(small, n), before);
  EXPECT_EQ(small.query_qp(n)->state, QpState::kInit);
  // With a range that fits, one call takes it to RTS with the send PSN.
  a.max_psn_range = 256;
  ASSERT_TRUE(small.connect_qp(n, a, mask | attr::kMpr).ok());
  EXPECT_EQ(small.query_qp(n)->state, QpState::kRts);
  EXPECT_EQ(small.query_qp(n)->sq_psn, 77u);
  EXPECT_EQ(small.query_qp(n)->timeout, 9);
  // Only from INIT.
  EXPECT_STREQ(small.connect_qp(n, a, mask).error().field, "state");
}

TEST_F(QpState_, AssignAttr_CopiesOnlyTheMaskedFields) {
  QpAttr from;
  from.mtu = 1024;
  from.timeout = 3;
  from.paths = {Path{9, 2}};
  from.max_wimm = 4;
  QpAttr to;
  assign_attr(to, from, attr::kTimeout | attr::kPaths);
  EXPECT_EQ(to.timeout, 3);
  EXPECT_EQ(to.paths.size(), 1u);
  EXPECT_EQ(to.mtu, QpAttr{}.mtu);
  EXPECT_EQ(to.max_wimm, QpAttr{}.max_wimm);
}

}  // namespace
}  // namespace mrc::engine

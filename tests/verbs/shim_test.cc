// Tests of verbs-shim/src/shim.cc and rdmacm.cc, the library itself (linked here as programs
// see it when it is preloaded; no libibverbs in this process):
//   - it exports every application-facing symbol of the installed libibverbs, so that no
//     verb handed an MRC object falls through to the real library (which would take mrc0's
//     context for one of its own and crash), and every rdma_* symbol the rdma_cm programs
//     it runs (rping, perftest) import, for the same reason with librdmacm;
//   - the verbs mrc0 does not do fail with the errno or return value verbs programs expect,
//     and the answers it can give (GUID, GID table, P_Key index) agree with the queries.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <link.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "loopback_env.h"

namespace mrc::verbs {
namespace {

const bool env_set = testing::set_loopback_env();

// Dynamic symbols of a binary by `nm -D <which>` (--defined-only, --undefined-only), without
// their versions.
std::set<std::string> dynamic_symbols(const std::string& path,
                                      const char* which = "--defined-only") {
  std::set<std::string> out;
  FILE* p = ::popen(("nm -D " + std::string(which) + " '" + path + "' 2>/dev/null").c_str(), "r");
  if (!p) return out;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    std::string l = line;
    while (!l.empty() && std::isspace(static_cast<unsigned char>(l.back()))) l.pop_back();
    std::string n = l.substr(l.find_last_of(' ') + 1);  // the name is the last field
    out.insert(n.substr(0, n.find('@')));
  }
  ::pclose(p);
  return out;
}

// Whether a libibverbs symbol may go to the real library even in a process using mrc0:
// provider-side and kernel-command helpers, and functions that take no verbs object.
bool context_free(const std::string& n) {
  static const std::set<std::string> free_fns = {
      "ibv_dofork_range",
      "ibv_dontfork_range",
      "ibv_rate_to_mbps",
      "ibv_rate_to_mult",
      "mbps_to_ibv_rate",
      "mult_to_ibv_rate",
      "ibv_node_type_str",
      "ibv_port_state_str",
      "ibv_event_type_str",
      "ibv_get_sysfs_path",
      "ibv_read_ibdev_sysfs_file",
      "ibv_register_driver",
  };
  return n.rfind("ibv_cmd_", 0) == 0 || n.rfind("ibv_copy_", 0) == 0 || free_fns.count(n) > 0;
}

TEST(ShimExports, EveryRdmaCmSymbolTheStockProgramsImport) {
  const auto ours = dynamic_symbols(MRC_VERBS_SHIM);
  ASSERT_TRUE(ours.count("rdma_connect")) << "could not list " << MRC_VERBS_SHIM;
  int programs = 0;
  for (const char* prog : {"/usr/bin/rping", "/usr/bin/ucmatose", "/usr/bin/rdma_server",
                           "/usr/bin/rdma_client", "/usr/bin/ib_write_bw", "/usr/bin/ib_read_bw",
                           "/usr/bin/ib_send_lat"}) {
    const auto theirs = dynamic_symbols(prog, "--undefined-only");
    if (theirs.empty()) continue;  // not installed
    ++programs;
    for (const std::string& n : theirs)
      if (n.rfind("rdma_", 0) == 0) {
        EXPECT_TRUE(ours.count(n)) << prog << " imports " << n;
      }
  }
  if (programs == 0) GTEST_SKIP() << "neither rdmacm-utils nor perftest is installed";
}

TEST(ShimExports, EveryApplicationSymbolOfLibibverbs) {
  void* real = ::dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!real) GTEST_SKIP() << "no libibverbs.so.1 here (Debian package libibverbs1)";
  link_map* lm = nullptr;
  ASSERT_EQ(::dlinfo(real, RTLD_DI_LINKMAP, &lm), 0);
  const std::string real_path = lm->l_name;
  const auto theirs = dynamic_symbols(real_path);
  const auto ours = dynamic_symbols(MRC_VERBS_SHIM);
  ::dlclose(real);
  ASSERT_GT(theirs.size(), 50u) << "could not list " << real_path << " (nm from binutils?)";
  ASSERT_TRUE(ours.count("ibv_open_device")) << "could not list " << MRC_VERBS_SHIM;
  std::vector<std::string> missing;
  for (const std::string& n : theirs) {
    if ((n.rfind("ibv_", 0) != 0 && n.rfind("_ibv_", 0) != 0) || context_free(n)) continue;
    if (!ours.count(n)) missing.push_back(n);
  }
  EXPECT_TRUE(missing.empty()) << "not exported by the shim (would reach the real library "
                               << "with MRC objects): " << ::testing::PrintToString(missing);
}

class ShimUnsupported : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_set);
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_GE(n, 1);
    dev_ = list[0];
    ASSERT_STREQ(ibv_get_device_name(dev_), "mrc0");
    ctx_ = ibv_open_device(dev_);
    ibv_free_device_list(list);
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    buf_.resize(1 << 16);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr_, nullptr);
    cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    qp_ = ibv_create_qp(pd_, &a);
    ASSERT_NE(qp_, nullptr);
  }
  void TearDown() override {
    if (qp_) {
      EXPECT_EQ(ibv_destroy_qp(qp_), 0);
    }
    if (cq_) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (mr_) {
      EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    }
    if (pd_) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
  }

  ibv_device* dev_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::vector<uint8_t> buf_;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
};

// ibv_rereg_mr reaches mrc0 (not the real libibverbs, which would crash on an MRC MR).
TEST_F(ShimUnsupported, ReregMr_GoesToMrc0) {
  void* other = buf_.data() + 64;
  EXPECT_EQ(ibv_rereg_mr(mr_, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other, 64, 0), 0);
  EXPECT_EQ(mr_->addr, other);
  EXPECT_EQ(mr_->length, 64u);
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(mr_, 0, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);
}

// ibv_import_device, ibv_import_pd and ibv_import_mr reach mrc0 (within the process, through
// a dup of the context's command fd), not the real libibverbs.
TEST_F(ShimUnsupported, ImportThroughCmdFd_GoesToMrc0) {
  ibv_context* imported = ibv_import_device(::dup(ctx_->cmd_fd));
  ASSERT_NE(imported, nullptr);
  EXPECT_STREQ(imported->device->name, "mrc0");
  ibv_pd* pd = ibv_import_pd(imported, pd_->handle);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(pd->handle, pd_->handle);
  ibv_mr* mr = ibv_import_mr(pd, mr_->handle);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->lkey, mr_->lkey);
  EXPECT_EQ(mr->addr, mr_->addr);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(pd, 0xfffffff), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_unimport_mr(mr);
  ibv_unimport_pd(pd);
  EXPECT_EQ(ibv_close_device(imported), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(ctx_, 0xfffffff), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(ShimUnsupported, FailWithEopnotsuppNotACrash) {
  errno = 0;
  EXPECT_EQ(ibv_reg_dmabuf_mr(pd_, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_ece ece{};
  EXPECT_EQ(ibv_query_ece(qp_, &ece), EOPNOTSUPP);
  EXPECT_EQ(ibv_set_ece(qp_, &ece), EOPNOTSUPP);
  EXPECT_EQ(ibv_import_dm(ctx_, 1), nullptr);
  ibv_wc wc{};
  ibv_grh grh{};
  ibv_ah_attr ah{};
  // mrc0's own (UD, ud.cc), not the real library's: a completion without a GRH is refused.
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &ah), EINVAL);
  uint8_t mac[ETHERNET_LL_SIZE];
  uint16_t vid = 0;
  EXPECT_EQ(ibv_resolve_eth_l2_from_gid(ctx_, &ah, mac, &vid), -1);
  EXPECT_EQ(ibv_resize_cq(cq_, 32), 0);  // mrc0's own (cq.cc)
  EXPECT_EQ(cq_->cqe, 32);
}

TEST_F(ShimUnsupported, AnswersAgreeWithTheQueries) {
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx_, &da), 0);
  EXPECT_EQ(ibv_get_device_guid(dev_), da.node_guid);
  EXPECT_NE(da.node_guid, 0u);
  EXPECT_EQ(ibv_get_device_index(dev_), 0);
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
  ibv_gid_entry table[4]{};
  ASSERT_EQ(ibv_query_gid_table(ctx_, table, 4, 0), 1);
  EXPECT_EQ(std::memcmp(table[0].gid.raw, gid.raw, 16), 0);
  EXPECT_EQ(table[0].port_num, 1u);
  EXPECT_EQ(table[0].gid_type, IBV_GID_TYPE_ROCE_V2);
  __be16 pkey = 0;
  ASSERT_EQ(ibv_query_pkey(ctx_, 1, 0, &pkey), 0);
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, pkey), 0);
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, static_cast<__be16>(pkey ^ 1)), -1);
  // Fork needs no preparation for mrc0: programs calling ibv_fork_init first go on.
  EXPECT_EQ(ibv_fork_init(), 0);
  EXPECT_NE(ibv_is_fork_initialized(), IBV_FORK_DISABLED);
  // MRC sprays one message over many paths: its data is not placed in order.
  EXPECT_EQ(ibv_query_qp_data_in_order(qp_, IBV_WR_RDMA_WRITE, 0), 0);
}

// A null object or attribute pointer fails the verb with EINVAL (and NULL for a verb that makes
// an object) instead of crashing, one test per entry point. Verbs inlined in the application
// (ibv_alloc_mw, ibv_create_qp_ex's attr, a null context of ibv_query_port) dereference the
// pointer in the application's own code before any library is reached: those crash with
// every provider, the real ones included, and are not tested here.
class ShimNullArgs : public ShimUnsupported {
 protected:
  // A good RC QP's (ibv_qp_init_attr or _ex) or SRQ's attributes, but for what a test nulls.
  template <class A>
  A rc_qp_attr() const {
    A a{};
    a.send_cq = a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 1;
    return a;
  }
  template <class A>
  static A srq_attr() {
    A a{};
    a.attr.max_wr = 4;
    a.attr.max_sge = 1;
    return a;
  }
};

#define EXPECT_EINVAL(call, want) \
  do {                            \
    errno = 0;                    \
    EXPECT_EQ(call, want);        \
    EXPECT_EQ(errno, EINVAL);     \
  } while (0)

TEST_F(ShimNullArgs, CreateQp_NullPdOrAttr) {
  auto a = rc_qp_attr<ibv_qp_init_attr>();
  EXPECT_EINVAL(ibv_create_qp(nullptr, &a), nullptr);
  EXPECT_EINVAL(ibv_create_qp(pd_, nullptr), nullptr);
}

TEST_F(ShimNullArgs, CreateQpEx_NullPd) {
  auto a = rc_qp_attr<ibv_qp_init_attr_ex>();
  a.comp_mask = IBV_QP_INIT_ATTR_PD;  // the inline verb hands this to ibv_create_qp
  EXPECT_EINVAL(ibv_create_qp_ex(ctx_, &a), nullptr);
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;  // to mrc0's create_qp_ex
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  EXPECT_EINVAL(ibv_create_qp_ex(ctx_, &a), nullptr);
}

TEST_F(ShimNullArgs, ModifyQp_NullQpOrAttr) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  EXPECT_EINVAL(ibv_modify_qp(nullptr, &a, IBV_QP_STATE), EINVAL);
  EXPECT_EINVAL(ibv_modify_qp(qp_, nullptr, IBV_QP_STATE), EINVAL);
}

TEST_F(ShimNullArgs, QueryQp_NullQpOrAttr) {
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  EXPECT_EINVAL(ibv_query_qp(nullptr, &a, IBV_QP_STATE, &init), EINVAL);
  EXPECT_EINVAL(ibv_query_qp(qp_, nullptr, IBV_QP_STATE, &init), EINVAL);
}

TEST_F(ShimNullArgs, DestroyQp_Null) { EXPECT_EINVAL(ibv_destroy_qp(nullptr), EINVAL); }

TEST_F(ShimNullArgs, CreateSrq_NullPdOrAttr) {
  auto a = srq_attr<ibv_srq_init_attr>();
  EXPECT_EINVAL(ibv_create_srq(nullptr, &a), nullptr);
  EXPECT_EINVAL(ibv_create_srq(pd_, nullptr), nullptr);
}

TEST_F(ShimNullArgs, CreateSrqEx_NullPd) {
  auto a = srq_attr<ibv_srq_init_attr_ex>();
  a.comp_mask = IBV_SRQ_INIT_ATTR_PD;  // the inline verb hands this to ibv_create_srq
  EXPECT_EINVAL(ibv_create_srq_ex(ctx_, &a), nullptr);
  a.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;  // to mrc0's create_srq_ex
  a.cq = cq_;
  EXPECT_EINVAL(ibv_create_srq_ex(ctx_, &a), nullptr);
}

TEST_F(ShimNullArgs, ModifyQuerySrq_NullSrqOrAttr) {
  auto init = srq_attr<ibv_srq_init_attr>();
  ibv_srq* srq = ibv_create_srq(pd_, &init);
  ASSERT_NE(srq, nullptr);
  ibv_srq_attr a{};
  EXPECT_EINVAL(ibv_modify_srq(nullptr, &a, IBV_SRQ_LIMIT), EINVAL);
  EXPECT_EINVAL(ibv_modify_srq(srq, nullptr, IBV_SRQ_LIMIT), EINVAL);
  EXPECT_EINVAL(ibv_query_srq(nullptr, &a), EINVAL);
  EXPECT_EINVAL(ibv_query_srq(srq, nullptr), EINVAL);
  EXPECT_EINVAL(ibv_destroy_srq(nullptr), EINVAL);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(ShimNullArgs, RegMr_NullPd) {
  EXPECT_EINVAL(ibv_reg_mr(nullptr, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EINVAL(ibv_reg_mr_iova2(nullptr, buf_.data(), 64, 0, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EINVAL(ibv_reg_dmabuf_mr(nullptr, 0, 64, 0, -1, IBV_ACCESS_LOCAL_WRITE), nullptr);
}

TEST_F(ShimNullArgs, DeregReregMr_NullMr) {
  EXPECT_EINVAL(ibv_dereg_mr(nullptr), EINVAL);
  EXPECT_EINVAL(ibv_rereg_mr(nullptr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, 0),
                IBV_REREG_MR_ERR_INPUT);
}

TEST_F(ShimNullArgs, AllocDeallocPd_Null) {
  EXPECT_EINVAL(ibv_alloc_pd(nullptr), nullptr);
  EXPECT_EINVAL(ibv_dealloc_pd(nullptr), EINVAL);
}

TEST_F(ShimNullArgs, CreateCq_NullContext) {
  EXPECT_EINVAL(ibv_create_cq(nullptr, 16, nullptr, nullptr, 0), nullptr);
  EXPECT_EINVAL(ibv_destroy_cq(nullptr), EINVAL);
  EXPECT_EINVAL(ibv_resize_cq(nullptr, 32), EINVAL);
}

TEST_F(ShimNullArgs, CreateCqEx_NullAttr) {
  EXPECT_EINVAL(ibv_create_cq_ex(ctx_, nullptr), nullptr);
}

TEST_F(ShimNullArgs, CompChannel_Null) {
  EXPECT_EINVAL(ibv_create_comp_channel(nullptr), nullptr);
  EXPECT_EINVAL(ibv_destroy_comp_channel(nullptr), EINVAL);
  ibv_cq* cq = nullptr;
  void* cq_context = nullptr;
  EXPECT_EINVAL(ibv_get_cq_event(nullptr, &cq, &cq_context), -1);
}

TEST_F(ShimNullArgs, CreateAh_NullPdOrAttr) {
  ibv_ah_attr a{};
  a.is_global = 1;
  a.port_num = 1;
  EXPECT_EINVAL(ibv_create_ah(nullptr, &a), nullptr);
  EXPECT_EINVAL(ibv_create_ah(pd_, nullptr), nullptr);
  ibv_wc wc{};
  ibv_grh grh{};
  EXPECT_EINVAL(ibv_create_ah_from_wc(nullptr, &wc, &grh, 1), nullptr);
  EXPECT_EINVAL(ibv_destroy_ah(nullptr), EINVAL);
}

// ibv_query_device_ex and ibv_query_port are inline: on a provider without the op they fall
// back to memset(attr) (GCC sees the null); mrc0 has both ops, which answer first.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnonnull"
TEST_F(ShimNullArgs, QueryDevice_NullContextOrAttr) {
  ibv_device_attr a{};
  EXPECT_EINVAL(ibv_query_device(nullptr, &a), EINVAL);
  EXPECT_EINVAL(ibv_query_device(ctx_, nullptr), EINVAL);
  EXPECT_EINVAL(ibv_query_device_ex(ctx_, nullptr, nullptr), EINVAL);
}

TEST_F(ShimNullArgs, QueryPort_NullAttr) {
  EXPECT_EINVAL(ibv_query_port(ctx_, 1, nullptr), EINVAL);
}

#pragma GCC diagnostic pop

TEST_F(ShimNullArgs, QueryGidPkey_Null) {
  ibv_gid gid{};
  EXPECT_EINVAL(ibv_query_gid(nullptr, 1, 0, &gid), -1);
  EXPECT_EINVAL(ibv_query_gid(ctx_, 1, 0, nullptr), -1);
  EXPECT_EINVAL(ibv_query_pkey(ctx_, 1, 0, nullptr), -1);
}

TEST_F(ShimNullArgs, AsyncEvent_Null) {
  ibv_async_event e{};
  EXPECT_EINVAL(ibv_get_async_event(nullptr, &e), -1);
  EXPECT_EINVAL(ibv_get_async_event(ctx_, nullptr), -1);
}

TEST_F(ShimNullArgs, OpenCloseDevice_Null) {
  EXPECT_EINVAL(ibv_open_device(nullptr), nullptr);
  EXPECT_EINVAL(ibv_close_device(nullptr), EINVAL);
}

TEST_F(ShimNullArgs, Import_Null) {
  EXPECT_EINVAL(ibv_import_pd(nullptr, pd_->handle), nullptr);
  EXPECT_EINVAL(ibv_import_mr(nullptr, mr_->handle), nullptr);
}

TEST_F(ShimNullArgs, Mcast_NullQpOrGid) {
  ibv_gid gid{};
  EXPECT_EINVAL(ibv_attach_mcast(nullptr, &gid, 0), EINVAL);
  EXPECT_EINVAL(ibv_detach_mcast(qp_, nullptr, 0), EINVAL);
}

}  // namespace
}  // namespace mrc::verbs

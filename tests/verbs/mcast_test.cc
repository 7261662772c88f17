// Multicast on the software verbs device (libmrc/src/verbs/mcast.cc) over two loopback planes:
// ibv_attach_mcast / ibv_detach_mcast and their refusals, and a UD SEND to a group reaching the
// attached QPs of two processes (this one and a forked child, each with its own driver and
// ephemeral ports), not a detached QP nor one with another Q_Key. Membership across machines:
// two processes told apart as two hosts (MRC_MCAST_HOST_ID), the member's record judged by its
// lease and not its pid, stale records (a lease run out, a dead process of this host) skipped
// and removed, and a member's lease renewed while it stays.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mrc/verbs/verbs.h"
#include "open_device.h"
#include "to_rts.h"
#include "verbs/mcast_record.h"
#include "wait_wc.h"

namespace mrc::verbs {
namespace {

constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kGrh = 40;
constexpr uint32_t kMcastQpn = 0xFFFFFF;

// Ephemeral ports (a forked child's driver binds its own) and a group directory of this
// test's own, removed at exit.
const std::string kDir = "/tmp/mrc-mcast-test-" + std::to_string(::getpid());
const bool env_set = [] {
  ::setenv("MRC_PLANES", "::1,::1", 1);
  ::setenv("MRC_PORT", "0", 1);
  ::setenv("MRC_STATS", "0", 1);
  ::setenv("MRC_MCAST_DIR", kDir.c_str(), 1);
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(kDir, ec);
  });
  return true;
}();

ibv_gid gid_of(const char* text) {
  ibv_gid g{};
  ::inet_pton(AF_INET6, text, g.raw);
  return g;
}

// One process's side: a PD, a buffer, a CQ per QP and UD QPs at RTS with the Q_Key given.
struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);
  ibv_mr* mr = nullptr;
  std::vector<ibv_cq*> cqs;
  std::vector<ibv_qp*> qps;

  bool open() {
    ctx = testing::open_the_device();
    if (!ctx) return false;
    pd = alloc_pd(ctx);
    mr = reg_mr(pd, buf.data(), buf.size(), reinterpret_cast<uintptr_t>(buf.data()),
                IBV_ACCESS_LOCAL_WRITE);
    return pd && mr;
  }
  ibv_qp* add_qp(ibv_qp_type type, uint32_t qkey = kQkey) {
    ibv_cq* cq = create_cq(ctx, 16, nullptr, nullptr, 0);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.qp_type = type;
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    ibv_qp* q = create_qp(pd, &a);
    if (!q) return nullptr;
    cqs.push_back(cq);
    qps.push_back(q);
    if (type != IBV_QPT_UD) return q;
    return testing::ud_to_rts(q, qkey) ? nullptr : q;
  }
  // A receive of 1 KiB at slot i of the buffer for QP i.
  int post_recv_on(size_t i) {
    ibv_sge s{reinterpret_cast<uintptr_t>(buf.data()) + 4096 * (i + 1), 1024, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = 100 + i;
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return post_recv(qps[i], &wr, &bad);
  }
  int send_to(size_t i, ibv_ah* ah, uint32_t qpn, uint32_t len) {
    ibv_sge s{reinterpret_cast<uintptr_t>(buf.data()), len, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = kQkey;
    ibv_send_wr* bad = nullptr;
    return post_send(qps[i], &wr, &bad);
  }
  const uint8_t* slot(size_t i) const { return buf.data() + 4096 * (i + 1); }
  void close() {
    for (ibv_qp* q : qps) destroy_qp(q);
    for (ibv_cq* c : cqs) destroy_cq(c);
    if (mr) dereg_mr(mr);
    if (pd) dealloc_pd(pd);
    if (ctx) close_device(ctx);
    *this = Side{};
  }
};

ibv_ah* group_ah(ibv_pd* pd, const ibv_gid& g) {
  ibv_ah_attr a{};
  a.is_global = 1;
  a.port_num = 1;
  a.dlid = 0xffff;
  a.grh.dgid = g;
  a.grh.hop_limit = 64;
  return create_ah(pd, &a);
}

TEST(Mcast, QueryDevice_AdvertisesGroups) {
  ASSERT_TRUE(env_set);
  Side s;
  ASSERT_TRUE(s.open());
  ibv_device_attr a{};
  ASSERT_EQ(query_device(s.ctx, &a), 0);
  EXPECT_GT(a.max_mcast_grp, 0);
  EXPECT_GT(a.max_mcast_qp_attach, 0);
  EXPECT_EQ(a.max_total_mcast_qp_attach, a.max_mcast_grp * a.max_mcast_qp_attach);
  s.close();
}

TEST(Mcast, AttachDetach_RefusesWhatVerbsRefuses) {
  Side s;
  ASSERT_TRUE(s.open());
  ibv_qp* ud = s.add_qp(IBV_QPT_UD);
  ibv_qp* rc = s.add_qp(IBV_QPT_RC);
  ASSERT_NE(ud, nullptr);
  ASSERT_NE(rc, nullptr);
  const ibv_gid group = gid_of("ff0e::1:2");
  const ibv_gid v4group = gid_of("::ffff:230.0.0.7");  // RoCE v2's IPv4 group
  EXPECT_EQ(attach_mcast(rc, &group, 0), EINVAL);      // not UD
  const ibv_gid unicast = gid_of("::1");
  EXPECT_EQ(attach_mcast(ud, &unicast, 0), EINVAL);
  const ibv_gid v4unicast = gid_of("::ffff:10.0.0.1");
  EXPECT_EQ(attach_mcast(ud, &v4unicast, 0), EINVAL);
  EXPECT_EQ(detach_mcast(ud, &group, 0), EINVAL);  // not attached
  EXPECT_EQ(attach_mcast(ud, &group, 0), 0);
  EXPECT_EQ(attach_mcast(ud, &group, 0), 0);  // twice: one attachment
  EXPECT_EQ(attach_mcast(ud, &v4group, 0), 0);
  EXPECT_EQ(detach_mcast(ud, &group, 0), 0);
  EXPECT_EQ(detach_mcast(ud, &group, 0), EINVAL);  // once only
  // This process's entry stays in the group the QP is still in, and goes with the QP.
  EXPECT_FALSE(std::filesystem::exists(kDir + "/ff0e0000000000000000000000010002"));
  const std::string v4dir = kDir + "/00000000000000000000ffffe6000007";
  EXPECT_FALSE(std::filesystem::is_empty(v4dir));
  s.close();
  EXPECT_FALSE(std::filesystem::exists(v4dir));
}

// The child: one UD QP attached to the group, one receive; says "ready" on `ready`, waits
// for the datagram, exits 0 if it came whole (GRH dgid the group, then the data), else a code
// naming what went wrong. With `host`, the child is that host (MRC_MCAST_HOST_ID). With
// `expect_none`, it waits 2 s and exits 0 if nothing came, 5 if a datagram did. With `hold`,
// it stays a member after the datagram until a byte comes on `hold`.
[[noreturn]] void member_child(const ibv_gid& group, int ready, const char* host = nullptr,
                               bool expect_none = false, int hold = -1) {
  ::alarm(20);  // a hang ends the child with SIGALRM
  if (host) ::setenv("MRC_MCAST_HOST_ID", host, 1);
  Side s;
  if (!s.open() || !s.add_qp(IBV_QPT_UD)) ::_exit(2);
  if (attach_mcast(s.qps[0], &group, 0) || s.post_recv_on(0)) ::_exit(3);
  const char r = 'r';
  if (::write(ready, &r, 1) != 1) ::_exit(4);
  if (expect_none) {
    ibv_wc wc{};
    for (int i = 0; i < 200; ++i) {
      if (poll_cq(s.cqs[0], 1, &wc) != 0) ::_exit(5);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    s.close();
    ::_exit(0);
  }
  const ibv_wc wc = testing::wait_wc(s.cqs[0], std::chrono::seconds(10));
  if (wc.status != IBV_WC_SUCCESS || wc.byte_len != kGrh + 64) ::_exit(5);
  if (std::memcmp(s.slot(0) + 24, group.raw, 16) != 0) ::_exit(6);  // the GRH's dgid
  for (uint32_t i = 0; i < 64; ++i)
    if (s.slot(0)[kGrh + i] != 0xa5) ::_exit(7);
  char go = 0;
  if (hold >= 0 && ::read(hold, &go, 1) != 1) ::_exit(8);
  s.close();
  ::_exit(0);
}

// Forks member_child(group, host, expect_none) and waits until it has attached. With `hold`,
// the child stays a member until a byte is written to *hold (a pipe this makes). -1: the
// fork or the child failed before it said ready.
pid_t start_member(const ibv_gid& group, const char* host = nullptr, bool expect_none = false,
                   int* hold = nullptr) {
  int ready[2], h[2] = {-1, -1};
  if (::pipe(ready) != 0 || (hold && ::pipe(h) != 0)) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    if (hold) ::close(h[1]);
    member_child(group, ready[1], host, expect_none, h[0]);
  }
  ::close(ready[1]);
  if (hold) {
    ::close(h[0]);
    *hold = h[1];
  }
  char r = 0;
  const bool said = pid > 0 && ::read(ready[0], &r, 1) == 1;
  ::close(ready[0]);
  return said ? pid : -1;
}

TEST(Mcast, Send_ReachesAttachedQpsOfTwoProcesses_NotDetachedNorOtherQkey) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support threads started after a multi-threaded fork";
#endif
  const ibv_gid group = gid_of("ff0e::4d:1");
  const pid_t pid = start_member(group);
  ASSERT_GT(pid, 0) << "the child did not attach";
  Side s;
  ASSERT_TRUE(s.open());
  ibv_qp* member = s.add_qp(IBV_QPT_UD);
  ibv_qp* left = s.add_qp(IBV_QPT_UD);
  ibv_qp* other_qkey = s.add_qp(IBV_QPT_UD, 0x22222222);
  ibv_qp* sender = s.add_qp(IBV_QPT_UD);
  ASSERT_TRUE(member && left && other_qkey && sender);
  for (ibv_qp* q : {member, left, other_qkey}) ASSERT_EQ(attach_mcast(q, &group, 0), 0);
  ASSERT_EQ(detach_mcast(left, &group, 0), 0);
  for (size_t i = 0; i < 3; ++i) ASSERT_EQ(s.post_recv_on(i), 0);
  ibv_ah* ah = group_ah(s.pd, group);
  ASSERT_NE(ah, nullptr);
  std::memset(s.buf.data(), 0xa5, 64);
  EXPECT_EQ(s.send_to(3, ah, 0x1234, 64), EINVAL);  // a group's QPN is 0xFFFFFF
  ASSERT_EQ(s.send_to(3, ah, kMcastQpn, 64), 0);
  const ibv_wc sent = testing::wait_wc(s.cqs[3]);
  EXPECT_EQ(sent.status, IBV_WC_SUCCESS);
  EXPECT_EQ(sent.wr_id, 7u);
  ibv_wc extra{};
  EXPECT_EQ(poll_cq(s.cqs[3], 1, &extra), 0) << "one SEND, one completion";
  const ibv_wc got = testing::wait_wc(s.cqs[0]);
  ASSERT_EQ(got.status, IBV_WC_SUCCESS);
  EXPECT_EQ(got.byte_len, kGrh + 64);
  EXPECT_EQ(got.src_qp, sender->qp_num);
  EXPECT_EQ(std::memcmp(s.slot(0) + 24, group.raw, 16), 0);
  EXPECT_EQ(s.slot(0)[kGrh], 0xa5);
  int status = -1;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "the child's datagram (2 open, 3 attach, 5 none, 6 GRH, 7 data)";
  // The one datagram went to every attached QP of this process in the same engine round as
  // to `member`: the detached QP and the one with another Q_Key have nothing.
  EXPECT_EQ(poll_cq(s.cqs[1], 1, &extra), 0) << "a detached QP received";
  EXPECT_EQ(poll_cq(s.cqs[2], 1, &extra), 0) << "a QP with another Q_Key received";
  // Nobody left in the group (the child exited, this process detaches): a SEND still
  // completes, as on a fabric with no member.
  ASSERT_EQ(detach_mcast(member, &group, 0), 0);
  ASSERT_EQ(detach_mcast(other_qkey, &group, 0), 0);
  ASSERT_EQ(s.send_to(3, ah, kMcastQpn, 64), 0);
  EXPECT_EQ(testing::wait_wc(s.cqs[3]).status, IBV_WC_SUCCESS);
  EXPECT_EQ(destroy_ah(ah), 0);
  s.close();
}

// ---- Membership across machines ----------------------------------------------------------

// This process as host `id` for the test's scope (MRC_MCAST_HOST_ID), then its own identity.
struct AsHost {
  explicit AsHost(const char* id) { ::setenv("MRC_MCAST_HOST_ID", id, 1); }
  ~AsHost() { ::unsetenv("MRC_MCAST_HOST_ID"); }
};

std::string group_path(const ibv_gid& g) {
  std::string d = kDir + "/";
  char h[3];
  for (uint8_t b : g.raw) {
    std::snprintf(h, sizeof h, "%02x", b);
    d += h;
  }
  return d;
}

// The record file of host `host` in the group's directory ("" if none).
std::string record_of(const ibv_gid& g, const std::string& host) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(group_path(g), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(host + ".", 0) == 0 && !name.ends_with(".tmp")) return e.path().string();
  }
  return {};
}

McastRecord read_record(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  auto r = parse_mcast_record(ss.str());
  EXPECT_TRUE(r) << path << ": " << (r ? "" : r.error());
  return r ? *r : McastRecord{};
}

// Writes `r` at `path` as a member would (whole, through a rename).
void write_record_at(const std::string& path, const McastRecord& r) {
  {
    std::ofstream f(path + ".tmp");
    f << encode_mcast_record(r);
  }
  ASSERT_EQ(std::rename((path + ".tmp").c_str(), path.c_str()), 0) << path;
}

// A pid no process of this machine has: a child's, exited and reaped.
int64_t dead_pid() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  ::waitpid(p, nullptr, 0);
  return p;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(Mcast, MemberOnAnotherHost_ReachedByItsLeaseNotItsPid) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support threads started after a multi-threaded fork";
#endif
  // Host B's member; its record's pid then names no process here, as on a real second machine
  // (the old pid check would have removed it): the datagram still reaches it.
  const ibv_gid group = gid_of("ff0e::4d:2");
  int hold = -1;
  const pid_t pid = start_member(group, "machine-b", false, &hold);
  ASSERT_GT(pid, 0) << "the child did not attach";
  AsHost a("machine-a");
  const std::string path = record_of(group, "machine-b");
  ASSERT_FALSE(path.empty()) << "no record of host machine-b";
  McastRecord rec = read_record(path);
  EXPECT_EQ(rec.pid, pid);
  EXPECT_GT(rec.expires_ms, now_ms()) << "a lease that runs";
  ASSERT_EQ(rec.planes.size(), 2u);
  rec.pid = dead_pid();
  write_record_at(path, rec);
  Side s;
  ASSERT_TRUE(s.open());
  ibv_qp* sender = s.add_qp(IBV_QPT_UD);
  ASSERT_NE(sender, nullptr);
  ibv_ah* ah = group_ah(s.pd, group);
  ASSERT_NE(ah, nullptr);
  std::memset(s.buf.data(), 0xa5, 64);
  ASSERT_EQ(s.send_to(0, ah, kMcastQpn, 64), 0);
  EXPECT_EQ(testing::wait_wc(s.cqs[0]).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::filesystem::exists(path)) << "another host's live record was removed";
  const char go = 'g';
  EXPECT_EQ(::write(hold, &go, 1), 1);
  ::close(hold);
  int status = -1;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "host B's datagram (2 open, 3 attach, 5 none, 6 GRH, 7 data, 8 hold)";
  EXPECT_EQ(destroy_ah(ah), 0);
  s.close();
}

TEST(Mcast, StaleRecords_LeaseOverElsewhereDeadProcessHere_SkippedAndRemoved) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support threads started after a multi-threaded fork";
#endif
  // Three records besides this process's live one: host B's member, alive, whose lease has run
  // out (its machine unreachable, say); a member of this host whose process is gone, with a
  // lease still running; and a file that is no record. A SEND reaches this process's member
  // only; the two stale records are removed, the foreign file is left alone.
  const ibv_gid group = gid_of("ff0e::4d:3");
  const pid_t pid = start_member(group, "machine-b", /*expect_none=*/true);
  ASSERT_GT(pid, 0) << "the child did not attach";
  AsHost a("machine-a");
  const std::string b_path = record_of(group, "machine-b");
  ASSERT_FALSE(b_path.empty());
  McastRecord b = read_record(b_path);
  b.expires_ms = now_ms() - 1;
  write_record_at(b_path, b);
  McastRecord gone = b;
  gone.host = "machine-a";
  gone.pid = dead_pid();
  gone.expires_ms = now_ms() + 30'000;
  const std::string gone_path = group_path(group) + "/" + mcast_record_name(gone);
  write_record_at(gone_path, gone);
  const std::string junk_path = group_path(group) + "/notes.txt";
  std::ofstream(junk_path) << "not a record\n";

  Side s;
  ASSERT_TRUE(s.open());
  ibv_qp* member = s.add_qp(IBV_QPT_UD);
  ibv_qp* sender = s.add_qp(IBV_QPT_UD);
  ASSERT_TRUE(member && sender);
  ASSERT_EQ(attach_mcast(member, &group, 0), 0);
  ASSERT_EQ(s.post_recv_on(0), 0);
  ASSERT_FALSE(record_of(group, "machine-a").empty());
  ibv_ah* ah = group_ah(s.pd, group);
  ASSERT_NE(ah, nullptr);
  std::memset(s.buf.data(), 0xa5, 64);
  ASSERT_EQ(s.send_to(1, ah, kMcastQpn, 64), 0);
  EXPECT_EQ(testing::wait_wc(s.cqs[1]).status, IBV_WC_SUCCESS);
  const ibv_wc got = testing::wait_wc(s.cqs[0]);
  EXPECT_EQ(got.status, IBV_WC_SUCCESS) << "this process's live member";
  EXPECT_FALSE(std::filesystem::exists(b_path)) << "a lease run out: removed";
  EXPECT_FALSE(std::filesystem::exists(gone_path)) << "a dead process of this host: removed";
  EXPECT_TRUE(std::filesystem::exists(junk_path)) << "not a record: left alone";
  std::filesystem::remove(junk_path);
  int status = -1;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "host B's member, its lease over, received (5)";
  EXPECT_EQ(destroy_ah(ah), 0);
  s.close();
  EXPECT_FALSE(std::filesystem::exists(group_path(group))) << "the last member left";
}

TEST(Mcast, Lease_RenewedWhileAMemberStaysThenGoneWithIt) {
  // A member's thread renews its record every kMcastRefresh (10 s), so a member on another
  // machine never sees it lapse; detaching removes it.
  const ibv_gid group = gid_of("ff0e::4d:4");
  AsHost a("machine-a");
  Side s;
  ASSERT_TRUE(s.open());
  ibv_qp* q = s.add_qp(IBV_QPT_UD);
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(attach_mcast(q, &group, 0), 0);
  const std::string path = record_of(group, "machine-a");
  ASSERT_FALSE(path.empty());
  const McastRecord first = read_record(path);
  EXPECT_EQ(first.pid, ::getpid());
  std::this_thread::sleep_for(kMcastRefresh + std::chrono::milliseconds(1500));
  const McastRecord later = read_record(path);
  EXPECT_GE(later.expires_ms, first.expires_ms + kMcastRefresh.count()) << "not renewed";
  EXPECT_GT(later.expires_ms, now_ms() + (kMcastLease - kMcastRefresh).count() - 2000);
  ASSERT_EQ(detach_mcast(q, &group, 0), 0);
  EXPECT_FALSE(std::filesystem::exists(path));
  s.close();
}

}  // namespace
}  // namespace mrc::verbs

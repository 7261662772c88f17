// Tests of libmrc/src/verbs/sysfs.cc: mrc0's sysfs tree agrees with what the device answers to
// ibv_query_device / ibv_query_port / ibv_query_gid, follows the kernel's layout (links resolve,
// the device directory names the plane ports' interfaces), is written faithfully to a directory,
// and the path rewrite takes exactly the tree's paths.
#include "mrc/verbs/sysfs.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "loopback_env.h"
#include "mrc/verbs/verbs.h"
#include "open_device.h"
#include "verbs/internal.h"

namespace mrc::verbs {
namespace {

const bool env_set = testing::set_loopback_env();

std::string file_of(const std::vector<SysfsNode>& tree, const std::string& path) {
  const SysfsNode* n = sysfs_find(tree, path);
  if (!n) return "<none>";
  if (n->kind != SysfsNode::Kind::kFile) return "<not a file>";
  return n->data;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return f ? s.str() : "<unreadable>";
}

class SysfsTree : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_set);
    ctx_ = testing::open_the_device();
    ASSERT_NE(ctx_, nullptr);
    tree_ = sysfs_tree(*the_device());
  }
  void TearDown() override {
    if (ctx_) close_device(ctx_);
  }
  ibv_context* ctx_ = nullptr;
  std::vector<SysfsNode> tree_;
};

TEST_F(SysfsTree, PortFilesAgreeWithQueryPort) {
  ibv_port_attr pa{};
  ASSERT_EQ(query_port(ctx_, 1, &pa), 0);
  const std::string p = "class/infiniband/mrc0/ports/1/";
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(file_of(tree_, p + "state"), "4: ACTIVE\n");
  EXPECT_EQ(file_of(tree_, p + "phys_state"), "5: LinkUp\n");
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(file_of(tree_, p + "link_layer"), "Ethernet\n");
  // 4x (active_width 2) EDR (active_speed 32): 4 lanes of 25 Gb/s.
  ASSERT_EQ(pa.active_width, 2);
  ASSERT_EQ(pa.active_speed, 32);
  EXPECT_EQ(file_of(tree_, p + "rate"), "100 Gb/sec (4X EDR)\n");
  char lid[16];
  std::snprintf(lid, sizeof lid, "0x%x\n", pa.lid);
  EXPECT_EQ(file_of(tree_, p + "lid"), lid);
  EXPECT_EQ(file_of(tree_, p + "pkeys/0"), "0xffff\n");
  EXPECT_EQ(file_of(tree_, p + "pkeys/1"), "<none>");
}

TEST_F(SysfsTree, GidFilesAgreeWithQueryGid) {
  ibv_port_attr pa{};
  ASSERT_EQ(query_port(ctx_, 1, &pa), 0);
  ASSERT_EQ(pa.gid_tbl_len, kGidTableLen);
  const std::string p = "class/infiniband/mrc0/ports/1/";
  int populated = 0;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid g{};
    ASSERT_EQ(query_gid(ctx_, 1, i, &g), 0);
    std::string want;
    for (int b = 0; b < 16; b += 2) {
      char h[8];
      std::snprintf(h, sizeof h, "%s%02x%02x", b ? ":" : "", g.raw[b], g.raw[b + 1]);
      want += h;
    }
    // Every index has its gids file, an empty entry's the zero GID (the kernel's output).
    EXPECT_EQ(file_of(tree_, p + "gids/" + std::to_string(i)), want + "\n") << i;
    ibv_gid_entry e{};
    const int r = query_gid_ex(ctx_, 1, i, &e);
    if (r == ENODATA) {  // empty: no attributes (the kernel's read of them fails)
      EXPECT_EQ(want, "0000:0000:0000:0000:0000:0000:0000:0000") << i;
      EXPECT_EQ(file_of(tree_, p + "gid_attrs/types/" + std::to_string(i)), "<none>") << i;
      EXPECT_EQ(file_of(tree_, p + "gid_attrs/ndevs/" + std::to_string(i)), "<none>") << i;
      continue;
    }
    ASSERT_EQ(r, 0) << i;
    ++populated;
    EXPECT_EQ(file_of(tree_, p + "gid_attrs/types/" + std::to_string(i)), "RoCE v2\n") << i;
    char name[IF_NAMESIZE] = {};
    const std::string ndev = e.ndev_ifindex && ::if_indextoname(e.ndev_ifindex, name)
                                 ? std::string(name) + "\n"
                                 : "<none>";
    EXPECT_EQ(file_of(tree_, p + "gid_attrs/ndevs/" + std::to_string(i)), ndev) << i;
  }
  std::vector<ibv_gid_entry> t(kGidTableLen);
  EXPECT_EQ(query_gid_table(ctx_, t.data(), t.size()), populated) << "populated entries only";
  const std::string past = std::to_string(pa.gid_tbl_len);
  EXPECT_EQ(file_of(tree_, p + "gids/" + past), "<none>");
  EXPECT_EQ(file_of(tree_, p + "gid_attrs/types/" + past), "<none>");
}

TEST_F(SysfsTree, NodeFilesAgreeWithQueryDevice) {
  ibv_device_attr da{};
  ASSERT_EQ(query_device(ctx_, &da), 0);
  unsigned char b[8];
  std::memcpy(b, &da.node_guid, 8);
  char guid[32];
  std::snprintf(guid, sizeof guid, "%02x%02x:%02x%02x:%02x%02x:%02x%02x\n", b[0], b[1], b[2], b[3],
                b[4], b[5], b[6], b[7]);
  EXPECT_EQ(file_of(tree_, "class/infiniband/mrc0/node_guid"), guid);
  EXPECT_EQ(file_of(tree_, "class/infiniband/mrc0/node_type"), "1: CA\n");
  EXPECT_EQ(file_of(tree_, "class/infiniband/mrc0/fw_ver"), std::string(da.fw_ver) + "\n");
  EXPECT_EQ(file_of(tree_, "class/infiniband_verbs/uverbs-mrc0/ibdev"), "mrc0\n");
}

TEST_F(SysfsTree, DeviceLinkNamesThePlanePortsInterfaces) {
  // Both loopback planes are on ::1: one interface, lo.
  EXPECT_EQ(file_of(tree_, "class/infiniband/mrc0/device/numa_node"), "-1\n");
  EXPECT_EQ(file_of(tree_, "class/infiniband_verbs/uverbs-mrc0/device/numa_node"), "-1\n");
  int nets = 0;
  for (const SysfsNode& n : tree_) {
    if (n.path.find("/net/") == std::string::npos) continue;
    ++nets;
    EXPECT_EQ(n.kind, SysfsNode::Kind::kLink);
    EXPECT_EQ(n.path.substr(n.path.rfind('/') + 1), "lo");
    EXPECT_EQ(n.data, "/sys/class/net/lo");
  }
  EXPECT_EQ(nets, 1);
}

TEST_F(SysfsTree, WrittenTreeReadsBackAndResolves) {
  char tmpl[] = "/tmp/mrc-sysfs-test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  ASSERT_EQ(write_sysfs_tree(root, tree_), 0);
  for (const SysfsNode& n : tree_) {
    if (n.kind == SysfsNode::Kind::kFile) {
      EXPECT_EQ(slurp(root + "/" + n.path), n.data) << n.path;
    }
  }
  // Through the links, as a program's path goes.
  EXPECT_EQ(slurp(root + "/class/infiniband/mrc0/ports/1/state"), "4: ACTIVE\n");
  EXPECT_EQ(slurp(root + "/class/infiniband/mrc0/device/numa_node"), "-1\n");
  char* real = ::realpath((root + "/class/infiniband/mrc0").c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  EXPECT_EQ(sysfs_unredirect(real, root, "x"), "/sys/devices/virtual/mrc/mrc0/infiniband/mrc0");
  std::free(real);
  // A second write into the same directory fails (files are made exclusively), naming why.
  EXPECT_EQ(write_sysfs_tree(root, tree_), EEXIST);
  EXPECT_EQ(std::system(("rm -rf '" + root + "'").c_str()), 0);
}

TEST(SysfsRedirect, OnlyTheTreesPaths) {
  const char* r = "/dev/shm/x";
  EXPECT_EQ(sysfs_redirect("/sys/class/infiniband/mrc0", r, "mrc0", "uverbs-mrc0"),
            "/dev/shm/x/class/infiniband/mrc0");
  EXPECT_EQ(sysfs_redirect("/sys/class/infiniband/mrc0/device/net/", r, "mrc0", "uverbs-mrc0"),
            "/dev/shm/x/class/infiniband/mrc0/device/net/");
  EXPECT_EQ(
      sysfs_redirect("/sys/class/infiniband_verbs/uverbs-mrc0/ibdev", r, "mrc0", "uverbs-mrc0"),
      "/dev/shm/x/class/infiniband_verbs/uverbs-mrc0/ibdev");
  EXPECT_EQ(sysfs_redirect("/sys/devices/virtual/mrc/mrc0/numa_node", r, "mrc0", "uverbs-mrc0"),
            "/dev/shm/x/devices/virtual/mrc/mrc0/numa_node");
  EXPECT_EQ(sysfs_redirect("/dev/infiniband/uverbs-mrc0", r, "mrc0", "uverbs-mrc0"), "/dev/null");
  // Not the tree: another device, a longer name, the class directory itself, other devices.
  for (const char* p : {"/sys/class/infiniband/mlx5_0/ports/1/state", "/sys/class/infiniband/mrc01",
                        "/sys/class/infiniband", "/sys/class/net/lo", "/sys/devices/virtual/mrcx",
                        "/dev/infiniband/uverbs0", "/dev/null", "sys/class/infiniband/mrc0",
                        "/etc/mrc/mrc.json", ""})
    EXPECT_EQ(sysfs_redirect(p, r, "mrc0", "uverbs-mrc0"), "") << p;
}

TEST(SysfsUnredirect, BackUnderSys) {
  EXPECT_EQ(sysfs_unredirect("/dev/shm/x/devices/virtual/mrc/mrc0", "/dev/shm/x", "o"),
            "/sys/devices/virtual/mrc/mrc0");
  EXPECT_EQ(sysfs_unredirect("/dev/null", "/dev/shm/x", "/dev/infiniband/uverbs-mrc0"),
            "/dev/infiniband/uverbs-mrc0");
  EXPECT_EQ(sysfs_unredirect("/sys/devices/virtual/net/lo", "/dev/shm/x", "o"),
            "/sys/devices/virtual/net/lo");
  EXPECT_EQ(sysfs_unredirect("/dev/shm/xy", "/dev/shm/x", "o"), "/dev/shm/xy");
}

}  // namespace
}  // namespace mrc::verbs

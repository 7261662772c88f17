// Tests of verbs-shim/src/sysfs.cc, the shim linked as a preloaded program sees it: libc's path
// calls (stat, lstat, statx, access, open, fopen, opendir, readlink, realpath) that name mrc0's
// sysfs tree see the device's own state (the GID files say what ibv_query_gid says), the device
// node is a character device, every other path is left alone, and the private copy is gone when
// the process exits (and a killed process's copy is removed by the next one).
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "loopback_env.h"

// Private to rdma-core (infiniband/driver.h); the shim exports it. `type`: enum
// ibv_gid_type_sysfs (0 IB/RoCE v1, 1 RoCE v2).
extern "C" int ibv_query_gid_type(ibv_context* c, uint8_t port, unsigned index, int* type);

namespace mrc::verbs {
namespace {

const bool env_set = testing::set_loopback_env();

std::string read_file(const char* path) {
  const int fd = ::open(path, O_RDONLY);
  if (fd < 0) return "<open: " + std::to_string(errno) + ">";
  char b[256];
  const ssize_t n = ::read(fd, b, sizeof b);
  ::close(fd);
  return n < 0 ? "<read>" : std::string(b, n);
}

std::vector<std::string> copies_of(pid_t pid) {
  glob_t g{};
  std::vector<std::string> out;
  const std::string pat = "/dev/shm/mrc-sysfs." + std::to_string(pid) + ".*";
  if (::glob(pat.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  return out;
}

TEST(ShimSysfs, GidFilesSayWhatQueryGidSays) {
  ASSERT_TRUE(env_set);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_GE(n, 1);
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  ASSERT_NE(ctx, nullptr);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
  ASSERT_EQ(pa.gid_tbl_len, 256);
  int populated = 0;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid g{};
    ASSERT_EQ(ibv_query_gid(ctx, 1, i, &g), 0) << i;
    char want[64];
    int k = 0;
    for (int b = 0; b < 16; b += 2)
      k += std::snprintf(want + k, sizeof want - k, "%s%02x%02x", b ? ":" : "", g.raw[b],
                         g.raw[b + 1]);
    const std::string p = "/sys/class/infiniband/mrc0/ports/1/gids/" + std::to_string(i);
    EXPECT_EQ(read_file(p.c_str()), std::string(want) + "\n");
    ibv_gid_entry e{};
    const int r = ibv_query_gid_ex(ctx, 1, i, &e, 0);
    int type = -1;
    ASSERT_EQ(ibv_query_gid_type(ctx, 1, i, &type), 0) << i;
    FILE* f = std::fopen(
        ("/sys/class/infiniband/mrc0/ports/1/gid_attrs/types/" + std::to_string(i)).c_str(), "r");
    if (r == ENODATA) {  // an empty entry: zero GID, type "IB/RoCE v1" (0), no type to read
      EXPECT_STREQ(want, "0000:0000:0000:0000:0000:0000:0000:0000") << i;
      EXPECT_EQ(type, 0) << i;
      EXPECT_EQ(f, nullptr) << i;
      if (f) std::fclose(f);
      continue;
    }
    ASSERT_EQ(r, 0) << i;
    ++populated;
    EXPECT_EQ(type, 1) << "RoCE v2, index " << i;
    ASSERT_NE(f, nullptr) << i;
    char line[32] = {};
    ASSERT_NE(std::fgets(line, sizeof line, f), nullptr);
    std::fclose(f);
    EXPECT_STREQ(line, "RoCE v2\n");
  }
  EXPECT_GE(populated, 1);
  ibv_gid_entry table[256];
  EXPECT_EQ(ibv_query_gid_table(ctx, table, 256, 0), populated);
  ibv_gid g{};
  errno = 0;
  EXPECT_EQ(ibv_query_gid(ctx, 1, 256, &g), -1) << "past the table: -1 (libibverbs' failure)";
  EXPECT_EQ(errno, EINVAL);
  int type = -1;
  EXPECT_EQ(ibv_query_gid_type(ctx, 1, 256, &type), -1);
  EXPECT_EQ(read_file("/sys/class/infiniband/mrc0/ports/1/state"), "4: ACTIVE\n");
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

TEST(ShimSysfs, StatReadlinkRealpathAndListing) {
  ASSERT_TRUE(env_set);
  struct stat s {};
  ASSERT_EQ(::stat("/sys/class/infiniband/mrc0", &s), 0);
  EXPECT_TRUE(S_ISDIR(s.st_mode));
  ASSERT_EQ(::lstat("/sys/class/infiniband/mrc0", &s), 0);
  EXPECT_TRUE(S_ISLNK(s.st_mode));
  struct statx sx {};
  ASSERT_EQ(::statx(AT_FDCWD, "/sys/class/infiniband/mrc0/device/net/", 0, STATX_TYPE, &sx), 0);
  EXPECT_TRUE(S_ISDIR(sx.stx_mode));
  EXPECT_EQ(::access("/sys/class/infiniband/mrc0/device/numa_node", R_OK), 0);
  char link[256] = {};
  ASSERT_GT(::readlink("/sys/class/infiniband/mrc0/device", link, sizeof link - 1), 0);
  EXPECT_STREQ(link, "../../../mrc0");
  char* real = ::realpath("/sys/class/infiniband/mrc0/device", nullptr);
  ASSERT_NE(real, nullptr);
  EXPECT_STREQ(real, "/sys/devices/virtual/mrc/mrc0");
  std::free(real);
  // The realpath answer is itself served.
  EXPECT_EQ(read_file("/sys/devices/virtual/mrc/mrc0/numa_node"), "-1\n");
  const int fd = ::openat(AT_FDCWD, "/sys/class/infiniband_verbs/uverbs-mrc0/ibdev", O_RDONLY);
  ASSERT_GE(fd, 0);
  ::close(fd);
  // device/net lists the plane ports' interface (both loopback planes: lo), which is the real
  // interface's directory.
  DIR* d = ::opendir("/sys/class/infiniband/mrc0/device/net");
  ASSERT_NE(d, nullptr);
  std::set<std::string> names;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.insert(e->d_name);
  ::closedir(d);
  EXPECT_EQ(names, std::set<std::string>{"lo"});
  EXPECT_EQ(read_file("/sys/class/infiniband/mrc0/device/net/lo/ifindex"),
            read_file("/sys/class/net/lo/ifindex"));
}

TEST(ShimSysfs, DeviceNodeIsACharacterDevice) {
  ASSERT_TRUE(env_set);
  struct stat s {};
  ASSERT_EQ(::stat("/dev/infiniband/uverbs-mrc0", &s), 0);
  EXPECT_TRUE(S_ISCHR(s.st_mode));
  EXPECT_EQ(::access("/dev/infiniband/uverbs-mrc0", R_OK | W_OK), 0);
  char* real = ::realpath("/dev/infiniband/uverbs-mrc0", nullptr);
  ASSERT_NE(real, nullptr);
  EXPECT_STREQ(real, "/dev/infiniband/uverbs-mrc0");
  std::free(real);
}

TEST(ShimSysfs, OtherPathsLeftAlone) {
  ASSERT_TRUE(env_set);
  struct stat s {};
  errno = 0;
  EXPECT_EQ(::stat("/sys/class/infiniband/mrc01", &s), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::stat("/sys/class/infiniband/mrc0/no_such_file", &s), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::stat("/dev/infiniband/uverbs0", &s) == 0,
            ::access("/dev/infiniband/uverbs0", F_OK) == 0);
  ASSERT_EQ(::stat("/proc/self/exe", &s), 0);
  char* real = ::realpath("/proc/self/exe", nullptr);
  ASSERT_NE(real, nullptr);
  EXPECT_EQ(std::string(real).find("mrc-sysfs"), std::string::npos);
  std::free(real);
}

TEST(ShimSysfs, CopyRemovedAtExitAndAfterAKill) {
  ASSERT_TRUE(env_set);
  // A child that exits: its copy goes with it.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct stat s {};
    const bool made =
        ::stat("/sys/class/infiniband/mrc0/node_type", &s) == 0 && !copies_of(::getpid()).empty();
    std::exit(made ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child saw no copy of its own";
  EXPECT_TRUE(copies_of(pid).empty());
  // A child killed after making its copy leaves it; the next process to make one removes it.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct stat s {};
    ::stat("/sys/class/infiniband/mrc0/node_type", &s);
    ::write(ready[1], "x", 1);
    ::pause();
    std::_Exit(0);
  }
  char x;
  ASSERT_EQ(::read(ready[0], &x, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(copies_of(pid).size(), 1u);
  ::kill(pid, SIGKILL);
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(copies_of(pid).size(), 1u);
  const pid_t killed = pid;
  pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct stat s {};
    std::exit(::stat("/sys/class/infiniband/mrc0/node_type", &s) == 0 ? 0 : 3);
  }
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(copies_of(killed).empty()) << "a killed process's copy was left behind";
  EXPECT_TRUE(copies_of(pid).empty());
}

}  // namespace
}  // namespace mrc::verbs

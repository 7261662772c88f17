// The sysfs tree of mrc0 (sysfs.h): generated from the device, written to a directory, and the
// path rewrite onto that copy.
#include "mrc/verbs/sysfs.h"
#include "mrc/verbs/verbs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

namespace {

constexpr std::string_view kSys = "/sys/";
constexpr std::string_view kDeviceDir = "devices/virtual/mrc/";

std::string fmt(const char* f, auto... args) {
  char b[256];
  std::snprintf(b, sizeof b, f, args...);
  return b;
}

// "fe80:0000:0000:0000:0202:c9ff:fe00:0001", as the kernel prints a GID (%pI6).
std::string gid_text(const ibv_gid& g) {
  std::string s;
  for (int i = 0; i < 16; i += 2) {
    if (i) s += ':';
    s += fmt("%02x%02x", g.raw[i], g.raw[i + 1]);
  }
  return s;
}

// node_guid as the kernel prints it: four big-endian 16-bit groups.
std::string guid_text(uint64_t be) {
  unsigned char b[8];
  std::memcpy(b, &be, 8);
  return fmt("%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
}

// The kernel's ports/N/rate ("100 Gb/sec (4X EDR)") from ibv_port_attr's width and speed codes.
std::string rate_text(const ibv_port_attr& a) {
  int lanes = 1;
  switch (a.active_width) {
    case 2:
      lanes = 4;
      break;
    case 4:
      lanes = 8;
      break;
    case 8:
      lanes = 12;
      break;
    default:
      break;
  }
  int tenths = 25;  // Gb/s per lane, in tenths
  const char* name = " SDR";
  switch (a.active_speed) {
    case 2:
      tenths = 50, name = " DDR";
      break;
    case 4:
      tenths = 100, name = " QDR";
      break;
    case 8:
      tenths = 100, name = " FDR10";
      break;
    case 16:
      tenths = 140, name = " FDR";
      break;
    case 32:
      tenths = 250, name = " EDR";
      break;
    case 64:
      tenths = 500, name = " HDR";
      break;
    case 128:
      tenths = 1000, name = " NDR";
      break;
    default:
      break;
  }
  const int r = tenths * lanes;
  return r % 10 ? fmt("%d.%d Gb/sec (%dX%s)\n", r / 10, r % 10, lanes, name)
                : fmt("%d Gb/sec (%dX%s)\n", r / 10, lanes, name);
}

std::string ifname(uint32_t ifindex) {
  char n[IF_NAMESIZE] = {};
  return ifindex && ::if_indextoname(ifindex, n) ? n : "";
}

bool under(std::string_view path, std::string_view prefix) {
  return path.substr(0, prefix.size()) == prefix &&
         (path.size() == prefix.size() || path[prefix.size()] == '/');
}

}  // namespace

bool open_device_names(std::string* name, std::string* uverbs_name) {
  const Device* dev = the_device();
  if (!dev) return false;
  *name = dev->dev.name;
  *uverbs_name = dev->dev.dev_name;
  return true;
}

std::vector<SysfsNode> open_device_tree() {
  const Device* dev = the_device();
  return dev ? sysfs_tree(*dev) : std::vector<SysfsNode>{};
}

std::vector<SysfsNode> sysfs_tree(const Device& dev) {
  using K = SysfsNode::Kind;
  const std::string name = dev.dev.name;        // mrc0
  const std::string uverbs = dev.dev.dev_name;  // uverbs-mrc0
  const std::string d = std::string(kDeviceDir) + name;
  const std::string ib = d + "/infiniband/" + name;
  const std::string uv = d + "/infiniband_verbs/" + uverbs;
  const ibv_port_attr pa = port_attr(dev);
  const std::string guid = guid_text(guid_of(dev.gid)) + "\n";
  std::vector<SysfsNode> t;
  auto dir = [&](std::string p) { t.push_back({std::move(p), K::kDir, {}}); };
  auto file = [&](std::string p, std::string v) {
    t.push_back({std::move(p), K::kFile, std::move(v)});
  };
  auto link = [&](std::string p, std::string to) {
    t.push_back({std::move(p), K::kLink, std::move(to)});
  };

  for (const char* p : {"class", "class/infiniband", "class/infiniband_verbs", "devices",
                        "devices/virtual", "devices/virtual/mrc"})
    dir(p);
  dir(d);
  file(d + "/numa_node", "-1\n");
  dir(d + "/net");
  std::vector<uint32_t> seen;
  for (const auto& plane : dev.cfg.udp.planes) {
    in6_addr a{};
    const std::string addr = plane.address.substr(0, plane.address.find('%'));
    in_addr v4{};
    if (::inet_pton(AF_INET6, addr.c_str(), &a) != 1) {
      if (::inet_pton(AF_INET, addr.c_str(), &v4) != 1) continue;
      a.s6_addr[10] = a.s6_addr[11] = 0xff;
      std::memcpy(a.s6_addr + 12, &v4, 4);
    }
    const uint32_t idx = ifindex_of(a);
    const std::string n = ifname(idx);
    if (n.empty() || std::find(seen.begin(), seen.end(), idx) != seen.end()) continue;
    seen.push_back(idx);
    link(d + "/net/" + n, "/sys/class/net/" + n);
  }

  dir(d + "/infiniband");
  dir(ib);
  link("class/infiniband/" + name, "../../" + ib);
  link(ib + "/device", "../../../" + name);
  file(ib + "/node_type", "1: CA\n");
  file(ib + "/node_guid", guid);
  file(ib + "/sys_image_guid", guid);
  file(ib + "/fw_ver", "mrc-sw 0.1.0\n");
  file(ib + "/hw_rev", "1\n");
  file(ib + "/hca_type", "MRC\n");
  file(ib + "/board_id", "MRC_SOFTWARE\n");
  file(ib + "/node_desc", name + " (MRC software device)\n");
  const std::string port = ib + "/ports/1";
  dir(ib + "/ports");
  dir(port);
  file(port + "/state", "4: ACTIVE\n");
  file(port + "/phys_state", "5: LinkUp\n");
  file(port + "/rate", rate_text(pa));
  file(port + "/link_layer",
       pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet\n" : "InfiniBand\n");
  file(port + "/lid", fmt("0x%x\n", pa.lid));
  file(port + "/lid_mask_count", "0\n");
  file(port + "/sm_lid", "0x0\n");
  file(port + "/sm_sl", "0\n");
  file(port + "/cap_mask", fmt("0x%08x\n", pa.port_cap_flags));
  dir(port + "/pkeys");
  file(port + "/pkeys/0", "0xffff\n");
  dir(port + "/gids");
  dir(port + "/gid_attrs");
  dir(port + "/gid_attrs/types");
  dir(port + "/gid_attrs/ndevs");
  // Every index of the table has gids/N; an empty entry's reads as the zero GID, as the
  // kernel's does. Its gid_attrs files are left out: the kernel's read of them fails
  // (EINVAL), here the open does (ENOENT).
  for (size_t i = 0; i < static_cast<size_t>(kGidTableLen); ++i) {
    const bool populated = i < dev.gids.size();
    file(port + "/gids/" + std::to_string(i),
         gid_text(populated ? dev.gids[i].gid : ibv_gid{}) + "\n");
    if (!populated) continue;
    file(port + "/gid_attrs/types/" + std::to_string(i), "RoCE v2\n");
    const std::string n = ifname(dev.gids[i].ifindex);
    if (!n.empty()) file(port + "/gid_attrs/ndevs/" + std::to_string(i), n + "\n");
  }

  dir(d + "/infiniband_verbs");
  dir(uv);
  link("class/infiniband_verbs/" + uverbs, "../../" + uv);
  link(uv + "/device", "../../../" + name);
  file(uv + "/ibdev", name + "\n");
  file(uv + "/abi_version", "1\n");
  return t;
}

int write_sysfs_tree(const std::string& root, const std::vector<SysfsNode>& tree) {
  for (const SysfsNode& n : tree) {
    const std::string p = root + "/" + n.path;
    switch (n.kind) {
      case SysfsNode::Kind::kDir:
        if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) return errno;
        break;
      case SysfsNode::Kind::kLink:
        if (::symlink(n.data.c_str(), p.c_str()) != 0) return errno;
        break;
      case SysfsNode::Kind::kFile: {
        const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (fd < 0) return errno;
        const ssize_t w = ::write(fd, n.data.data(), n.data.size());
        const int err = errno;
        ::close(fd);
        if (w != static_cast<ssize_t>(n.data.size())) return w < 0 ? err : EIO;
        break;
      }
    }
  }
  return 0;
}

const SysfsNode* sysfs_find(const std::vector<SysfsNode>& tree, std::string_view path) {
  std::string rel(path);
  for (int hops = 0; hops < 8; ++hops) {  // follow the tree's relative links in the path
    auto it = std::find_if(tree.begin(), tree.end(), [&](const SysfsNode& n) {
      return n.kind == SysfsNode::Kind::kLink && n.data[0] != '/' && under(rel, n.path);
    });
    if (it == tree.end()) break;
    std::vector<std::string> parts;  // the link's directory, then its target's components
    std::string joined = it->path.substr(0, it->path.rfind('/')) + "/" + it->data;
    for (size_t b = 0; b <= joined.size();) {
      size_t e = joined.find('/', b);
      if (e == std::string::npos) e = joined.size();
      const std::string c = joined.substr(b, e - b);
      if (c == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!c.empty() && c != ".") {
        parts.push_back(c);
      }
      b = e + 1;
    }
    std::string target;
    for (const auto& c : parts) target += (target.empty() ? "" : "/") + c;
    rel = target + rel.substr(it->path.size());
  }
  auto it =
      std::find_if(tree.begin(), tree.end(), [&](const SysfsNode& n) { return n.path == rel; });
  return it == tree.end() ? nullptr : &*it;
}

std::string sysfs_redirect(std::string_view path, std::string_view root, std::string_view dev_name,
                           std::string_view uverbs_name) {
  if (path.substr(0, 5) == "/dev/") {
    const std::string node = "/dev/infiniband/" + std::string(uverbs_name);
    return path == node ? "/dev/null" : "";
  }
  if (path.substr(0, kSys.size()) != kSys) return "";
  const std::string_view rel = path.substr(kSys.size());
  const std::string ib = "class/infiniband/" + std::string(dev_name);
  const std::string uv = "class/infiniband_verbs/" + std::string(uverbs_name);
  if (!under(rel, ib) && !under(rel, uv) &&
      !under(rel, kDeviceDir.substr(0, kDeviceDir.size() - 1)))
    return "";
  std::string out(root);
  out += '/';
  out += rel;
  return out;
}

std::string sysfs_unredirect(std::string_view path, std::string_view root,
                             std::string_view original) {
  if (path == "/dev/null") return std::string(original);
  if (!root.empty() && under(path, root)) return "/sys" + std::string(path.substr(root.size()));
  return std::string(path);
}

}  // namespace mrc::verbs

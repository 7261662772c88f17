// The sysfs tree of mrc0: the files programs read about an RDMA device under /sys (UCX, rdma-core's
// tests, NCCL's IB transport), generated from the device's own state, and the rewrite that sends
// a program's path for them to a private copy of the tree. Threading: the functions are pure or
// read the device's fixed state (the_device()); thread-safe.
//
// mrc0 has no kernel part, so the real /sys knows nothing of it. The verbs shim
// (verbs-shim/src/sysfs.cc) writes this tree once per process into a private directory and
// rewrites the paths of open/stat/access/opendir/readlink/realpath calls that name it; every other
// path is left alone. The layout follows the kernel's (drivers/infiniband/core/sysfs.c):
//
//   class/infiniband/mrc0 -> ../../devices/virtual/mrc/mrc0/infiniband/mrc0
//     node_type "1: CA", node_guid and sys_image_guid (xxxx:xxxx:xxxx:xxxx), fw_ver, hw_rev,
//     hca_type, board_id, node_desc
//     ports/1/  state "4: ACTIVE", phys_state "5: LinkUp", rate "100 Gb/sec (4X EDR)", link_layer
//               "Ethernet", lid, lid_mask_count, sm_lid, sm_sl, cap_mask, pkeys/0, gids/N (each
//               of the kGidTableLen entries, 8 groups of 4 hex digits; an empty one all zeros),
//               gid_attrs/types/N "RoCE v2", gid_attrs/ndevs/N (the name of the interface
//               holding GID N; absent when none here does, where the kernel's read fails too);
//               no gid_attrs files for an empty entry (the kernel's read of them fails with
//               EINVAL): all as ibv_query_port / _gid say
//     device -> ../../../mrc0 (the device directory)
//   class/infiniband_verbs/uverbs-mrc0 ->
//   ../../devices/virtual/mrc/mrc0/infiniband_verbs/uverbs-mrc0
//     ibdev "mrc0", abi_version, device -> ../../../mrc0
//   devices/virtual/mrc/mrc0  the device: numa_node "-1" (no PCI function, so no NUMA node),
//     net/<ifname> -> /sys/class/net/<ifname> for each plane port's interface, in plane order (the
//     real interface's directory: its address, ifindex and MTU are the kernel's)
//
// The device node /dev/infiniband/uverbs-mrc0 that UCX checks with stat and access before it
// takes a device is answered as /dev/null (a character device anyone may read and write); mrc0's
// contexts never open it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mrc::verbs {

struct Device;

/// One node of the tree. path is relative to the sysfs root ("class/infiniband/mrc0/...").
struct SysfsNode {
  enum class Kind { kDir, kFile, kLink };
  std::string path;
  Kind kind = Kind::kFile;
  std::string data;  // kFile: the contents (ending in a newline); kLink: the link's target
};

/// The tree of `dev`, directories before what they hold.
std::vector<SysfsNode> sysfs_tree(const Device& dev);

/// For the verbs shim, which sees no device internals: this process's open device
/// (the_device()) by its ibv_device name and dev_name ("mrc0", "uverbs-mrc0"), and its tree.
/// false / empty when no device is open.
bool open_device_names(std::string* name, std::string* uverbs_name);
std::vector<SysfsNode> open_device_tree();

/// The node at `path` (relative to the sysfs root), following the tree's relative links on the
/// way as the kernel would ("class/infiniband/mrc0/ports/1/state"); null if there is none.
const SysfsNode* sysfs_find(const std::vector<SysfsNode>& tree, std::string_view path);

/// Writes `tree` under `root`, an existing directory. 0, or the errno of the step that failed.
int write_sysfs_tree(const std::string& root, const std::vector<SysfsNode>& tree);

/// Where a program's absolute `path` is to be looked up: under `root` (the tree's copy) when it
/// names the tree (class/infiniband/<dev>, class/infiniband_verbs/<uverbs dev>,
/// devices/virtual/mrc, each as the path itself or a directory of it), "/dev/null" for the device
/// node, empty for every other path (left alone). `dev_name` and `uverbs_name` are the
/// ibv_device's name and dev_name.
std::string sysfs_redirect(std::string_view path, std::string_view root, std::string_view dev_name,
                           std::string_view uverbs_name);

/// The inverse for a resolved path of the tree's copy (realpath's answer): `path` under `root`
/// -> the same under /sys, "/dev/null" -> `original`; anything else unchanged.
std::string sysfs_unredirect(std::string_view path, std::string_view root,
                             std::string_view original);

}  // namespace mrc::verbs

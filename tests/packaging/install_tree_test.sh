#!/usr/bin/env bash
# Install.TreeConsumer_FindPackageAndPkgConfig: `cmake --install` of libmrc (components lib,
# dev) into a fresh prefix, then a C program outside the tree (consumer/) built against it
# three times: find_package(mrc CONFIG), pkg-config, and lib_mrc.so linked by path as OCP
# makefiles do; each run. A C++ program (consumer_cpp.cc) is built with find_package against
# the installed C++ API (<mrc/engine/engine.h>, ...) and run; the private headers and the
# simulator's are not installed. Needs the build tree built.
#
# Usage: install_tree_test.sh BUILD_DIR CONSUMER_SRC VERSION
set -euo pipefail
build=$1 src=$2 version=$3
tmp=$(mktemp -d /tmp/mrc-install-tree.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

for c in lib dev; do
  cmake --install "$build" --prefix "$prefix" --component "$c" >"$tmp/install-$c.log" ||
    { cat "$tmp/install-$c.log"; echo "FAIL: cmake --install --component $c"; exit 1; }
done
# What OCP programs link and include.
for f in libmrc.so libmrc.so.1 lib_mrc.so mrc.h mrc_ctl.h mrc-config.cmake mrc.pc; do
  [[ -n "$(find "$prefix" -name "$f")" ]] || { echo "FAIL: $f not installed"; exit 1; }
done
# The C++ API, without libmrc's private headers (libmrc/src) and the simulator's.
inc=$prefix/include/mrc
for f in engine/engine.h io/udp/udp_driver.h io/config.h wire/wire.h verbs/verbs.h srv6/fabric.h; do
  [[ -f "$inc/$f" ]] || { echo "FAIL: mrc/$f not installed"; exit 1; }
done
for f in engine/internal.h verbs/objects.h io/sim testing; do
  [[ ! -e "$inc/$f" ]] || { echo "FAIL: mrc/$f installed (private)"; exit 1; }
done
ocp=$(find "$prefix" -name lib_mrc.so)
[[ "$(readlink "$ocp")" == libmrc.so.1 ]] || { echo "FAIL: lib_mrc.so -> $(readlink "$ocp")"; exit 1; }

want="mrc $version api 1.0.1"

# 1. find_package(mrc CONFIG)
cmake -S "$src" -B "$tmp/cm" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cm.log" 2>&1 ||
  { cat "$tmp/cm.log"; echo "FAIL: find_package(mrc CONFIG)"; exit 1; }
cmake --build "$tmp/cm" >"$tmp/cm-build.log" 2>&1 ||
  { cat "$tmp/cm-build.log"; echo "FAIL: consumer build (CMake package)"; exit 1; }
got=$("$tmp/cm/consumer")
[[ "$got" == "$want" ]] || { echo "FAIL: CMake consumer printed '$got', want '$want'"; exit 1; }
echo "find_package: $got"
want_cpp="mrc c++ api: probe psn 7, cq empty"
got=$("$tmp/cm/consumer_cpp")
[[ "$got" == "$want_cpp" ]] || { echo "FAIL: C++ consumer printed '$got', want '$want_cpp'"; exit 1; }
echo "find_package (C++ API): $got"

# 2. pkg-config
pc=$(dirname "$(find "$prefix" -name mrc.pc)")
flags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs mrc)
[[ "$(PKG_CONFIG_PATH=$pc pkg-config --modversion mrc)" == "$version" ]] ||
  { echo "FAIL: pkg-config --modversion mrc"; exit 1; }
# shellcheck disable=SC2086  # flags are words
cc -std=c11 -Wall -Werror -o "$tmp/pc-consumer" "$src/consumer.c" $flags
libdir=$(PKG_CONFIG_PATH=$pc pkg-config --variable=libdir mrc)
got=$(LD_LIBRARY_PATH=$libdir "$tmp/pc-consumer")
[[ "$got" == "$want" ]] || { echo "FAIL: pkg-config consumer printed '$got', want '$want'"; exit 1; }
# It runs with the installed library, not the build tree's.
# (ldd's output is captured first: `ldd | grep -q` fails under pipefail when grep exits early.)
libs=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/pc-consumer")
grep -qF "libmrc.so.1 => $libdir/libmrc.so.1" <<<"$libs" ||
  { echo "$libs"; echo "FAIL: not the installed libmrc"; exit 1; }
echo "pkg-config ($flags): $got"

# 3. As the OCP benchmark's makefile does: -I$(MRC_H_PATH), $(MRC_LIB_DIR)/lib_mrc.so by path.
cc -std=c11 -Wall -Werror -I"$prefix/include/mrc" -I"$prefix/include" -o "$tmp/ocp-consumer" \
  "$src/consumer.c" "$libdir/lib_mrc.so"
needed=$(readelf -d "$tmp/ocp-consumer" | grep -F '(NEEDED)' | grep -F mrc || true)
[[ "$needed" == *"[libmrc.so.1]"* ]] || { echo "FAIL: linked through lib_mrc.so, records: $needed"; exit 1; }
got=$(LD_LIBRARY_PATH=$libdir "$tmp/ocp-consumer")
[[ "$got" == "$want" ]] || { echo "FAIL: lib_mrc.so consumer printed '$got', want '$want'"; exit 1; }
echo "lib_mrc.so (NEEDED libmrc.so.1): $got"
echo "PASS"

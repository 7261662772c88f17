#!/usr/bin/env bash
# Installs the Debian packages the project needs to build and test.
# Idempotent: checks with dpkg-query first and prints nothing when all are present.
# As root it installs what is missing; as another user it lists what is missing and fails.
#
# Usage: bash scripts/deps.sh           install what is missing
#        bash scripts/deps.sh --check   only report; exit 1 if anything is missing
set -euo pipefail

# Debian package names, grouped by what needs them. Add new ones here.
PACKAGES=(
  # build
  cmake ninja-build g++ pkg-config
  # tools (tools/): command-line parsing
  libcli11-dev
  nlohmann-json3-dev
  # tests (tests/) and benchmarks (perf/)
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  # namespace fabric (tools/mrc-fabric): netlink, nftables, tc eBPF trimming
  iproute2 nftables ethtool libnl-3-dev libnl-route-3-dev clang llvm libbpf-dev bpftool linux-libc-dev
  # fuzzing (fuzz/): libFuzzer runtime for clang
  libclang-rt-14-dev
  # fault runs (tools/mrc-perf): baselines and plots
  iperf3 mptcpize gnuplot-nox
  # the rdma_cm programs the verbs shim runs (rping, ucmatose, rdma_server/rdma_client, qperf)
  rdmacm-utils qperf
  # UCX over mrc0 through the shim (ucx_info, ucx_perftest: tests/verbs/ns_ucx_test.cc) and the
  # two-rank MPI check across fabric hosts (tests/mpi: mpicc, mpirun)
  ucx-utils openmpi-bin libopenmpi-dev
  # rdma-core's own test suite (pyverbs) run on mrc0 through the shim (tests/pyverbs)
  python3-pyverbs
  # the software verbs device (headers) and the stock programs the verbs shim runs
  libibverbs-dev perftest ibverbs-utils
  # install and packages (packaging/): man pages from --help, the .debs' Depends (dpkg-shlibdeps),
  # Debian's package checker run on them (tests/packaging/debs_test.sh)
  help2man dpkg-dev lintian
  # the Wireshark dissector's tests (tools/wireshark): tshark, a capture on the namespace fabric
  tshark tcpdump
  # mrcctl metrics scraped by a real Prometheus server (tests/mrcctl/prometheus_test.cc)
  prometheus
)

check_only=0
case "${1:-}" in
  --check) check_only=1 ;;
  "") ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "deps.sh: unknown option: $1" >&2; exit 2 ;;
esac

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if ((check_only)); then
  echo "deps.sh: missing packages: ${missing[*]}" >&2
  exit 1
fi

if ((EUID != 0)); then
  echo "deps.sh: missing packages: ${missing[*]}" >&2
  echo "deps.sh: not root; install them with: sudo bash scripts/deps.sh" >&2
  exit 1
fi

echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# wireshark-common asks whether non-root users may capture: no question, no setuid dumpcap.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}" >/dev/null
echo "deps.sh: done"

#!/usr/bin/env bash
# The project's demo command (README.md): installs missing Debian packages, builds with the
# release preset (build/) and runs the fault demo on the namespace fabric:
#   build/tools/mrc-perf --demo    2 hosts, 4 planes x 4 spines, 2 Gbit/s host ports (tbf),
#                                  a 30 s verified WRITE run while a T1 fails and is restored
#                                  and then a T0 of plane 2 goes down and up; a line per
#                                  second, a summary table, demo-out/demo.csv and demo.png;
#                                  the fabric is removed at the end, also on Ctrl-C.
# Where network namespaces cannot be made (no root / CAP_NET_ADMIN) it runs the same kind
# of fault run on the simulated fabric instead (build/tools/mrc-demo).
#
# Usage: bash scripts/demo.sh [mrc-perf args...]    (e.g. --duration 60, --baseline tcp)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ $EUID -eq 0 ]]; then bash scripts/deps.sh; else bash scripts/deps.sh --check || true; fi
cmake --preset release --log-level=WARNING
cmake --build --preset release --target mrc-perf mrc-demo --parallel "$(nproc)"
exec build/tools/mrc-perf --demo "$@"

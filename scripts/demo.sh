#!/usr/bin/env bash
# The project's demo command (README.md): installs missing Debian packages, builds
# mrc-demo with the release preset (build/) and runs it. Arguments go to mrc-demo.
#
# Usage: bash scripts/demo.sh [mrc-demo args...]    (bash scripts/demo.sh --help: its options)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/deps.sh
cmake --preset release --log-level=WARNING
cmake --build --preset release --target mrc-demo --parallel "$(nproc)"
exec build/tools/mrc-demo "$@"

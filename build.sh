#!/usr/bin/env bash
# Installs the packages (setup.sh) and builds everything into build/.
# Used by run.sh, test.sh and CI; safe to run again (incremental).
set -euo pipefail
cd "$(dirname "$0")"
# test.sh has just run it (and timed it apart).
[ -n "${METRICS_SETUP_DONE:-}" ] || ./setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" >/dev/null
ninja -C build -j"$jobs" "$@"

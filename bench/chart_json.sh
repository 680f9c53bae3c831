#!/usr/bin/env bash
# The chart JSON benchmark: builds, then runs bench/chart_json_bench (no
# database). Arguments go to the benchmark (--series, --buckets, --min_time).
# The last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh chart_json_bench >/dev/null
exec build/bench/chart_json_bench "$@"

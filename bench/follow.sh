#!/usr/bin/env bash
# The follow benchmark: builds, then runs bench/follow_bench under
# pg_virtualenv (a throwaway PostgreSQL with default settings, removed
# afterwards). Arguments go to the benchmark; --helpfull lists them. Takes
# about two minutes; the last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh follow_bench metricsd >/dev/null
exec pg_virtualenv build/bench/follow_bench "$@"

#!/usr/bin/env bash
# The overload soak (not part of the test suite): builds, then runs
# bench/soak_bench under pg_virtualenv (a throwaway PostgreSQL, removed
# afterwards). Arguments go to the benchmark (--helpfull lists them):
#   bench/soak.sh                        10 minutes at twice the capacity
#   bench/soak.sh --minutes=3            shorter
#   bench/soak.sh --slow_db_seconds=60   with the stream positions locked for
#                                        60 s in the middle (a slow database)
# It needs disk for what it stores: about 60 bytes a value, so some 10-20 GB
# for the default run on this machine. The last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh soak_bench metricsd >/dev/null
exec pg_virtualenv build/bench/soak_bench "$@"

#!/usr/bin/env bash
# The query benchmark: builds, then runs bench/query_bench under
# pg_virtualenv (a throwaway PostgreSQL with default settings, removed
# afterwards). Arguments go to the benchmark; --helpfull lists them. The full
# run loads about 26 million values and takes several minutes; --largest=1000000
# is a quick look. The last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh query_bench metricsd >/dev/null
exec pg_virtualenv build/bench/query_bench "$@"

#!/usr/bin/env bash
# The doors benchmark: builds, then runs bench/doors_bench under
# pg_virtualenv (a throwaway PostgreSQL, removed afterwards): one chart
# query's server CPU over REST and over gRPC, and REST's p50 and p99 under
# 100 clients at once. Arguments go to the benchmark (--metricsd=PATH
# measures another build's server); --helpfull lists them. Takes about 40 s;
# the last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh doors_bench metricsd >/dev/null
exec pg_virtualenv build/bench/doors_bench "$@"

#!/usr/bin/env bash
# The bad-token flood benchmark: builds, then runs bench/auth_flood_bench
# under pg_virtualenv (a throwaway PostgreSQL, removed afterwards): the CPU
# a refused request costs beside a chart query's, and a good client's
# throughput and p99 beside four flooding clients, with the per-address
# limit on (as shipped) and off (the refused-token cache alone). Arguments
# go to the benchmark (--flood=5m adds the RSS figure of a five-minute,
# million-token flood); --helpfull lists them. Takes about two minutes; the
# last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh auth_flood_bench metricsd >/dev/null
exec pg_virtualenv build/bench/auth_flood_bench "$@"

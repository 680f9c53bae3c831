#!/usr/bin/env bash
# The storage benchmark: builds, then runs bench/storage_bench under
# pg_virtualenv (a throwaway PostgreSQL with default settings, removed
# afterwards): 10 million realistic values of one 8-GPU agent through gRPC
# ingest, then bytes per value by part against an uncompressed baseline.
# About a minute. Arguments go to the benchmark (--values=N). The last line
# is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh storage_bench metricsd >/dev/null
exec pg_virtualenv build/bench/storage_bench "$@"

#!/usr/bin/env bash
# The ingest benchmark: builds, then runs bench/ingest_bench under
# pg_virtualenv (a throwaway PostgreSQL with default settings and durable
# commits, removed afterwards). Arguments go to the benchmark; --helpfull
# lists them. Takes about three minutes; the last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh ingest_bench metricsd >/dev/null
exec pg_virtualenv build/bench/ingest_bench "$@"

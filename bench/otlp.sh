#!/usr/bin/env bash
# The OTLP ingest benchmark: builds, then runs bench/otlp_bench under
# pg_virtualenv (a throwaway PostgreSQL with default settings and durable
# commits, removed afterwards): the same values through the service's own
# stream, OTLP/gRPC, OTLP/HTTP protobuf and OTLP/HTTP JSON. Arguments go to
# the benchmark; --helpfull lists them. Takes about a minute; the last line
# is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh otlp_bench metricsd >/dev/null
exec pg_virtualenv build/bench/otlp_bench "$@"

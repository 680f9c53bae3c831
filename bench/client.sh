#!/usr/bin/env bash
# The client benchmark: builds, then runs bench/client_bench under
# pg_virtualenv (a throwaway PostgreSQL) against its own metricsd. Measures
# the Reporter's CPU per sample and metrics-agent's share of a core with 8
# fake GPUs. Arguments go to the benchmark (--reports, --agent_time); takes
# about a minute; the last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh client_bench >/dev/null
exec pg_virtualenv build/bench/client_bench "$@"

#!/usr/bin/env bash
# The page benchmark: builds metricsd and the seeder, then runs
# bench/page_bench.js under pg_virtualenv (a throwaway PostgreSQL, removed
# afterwards): a 7-day 8-GPU trial and a 5-minute one, each loaded in
# headless Chromium 10 times after a warm-up; then a trial of 16 such agents
# (its all-agents view against one agent's) and 8 such trials compared
# (against one alone). Arguments go to page_bench.js (--loads=N, --days=D,
# --nodes=N, --compare=N). The last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh metricsd metricsctl page_seed >/dev/null
exec pg_virtualenv node bench/page_bench.js build/server/metricsd build/bench/page_seed "$@"

#!/usr/bin/env bash
# The peers benchmark: builds, then runs bench/peers_bench under
# pg_virtualenv (a throwaway PostgreSQL with default settings, removed
# afterwards): a week of one 8-GPU agent loaded into metricsd, Debian's
# Prometheus (promtool blocks) and VictoriaMetrics (its import API); bytes a
# sample, ingest CPU, 1000-point chart queries over an hour, a day and the
# week, and the planted spikes each answer keeps. About 13 minutes.
# Arguments go to the benchmark (--days=N, --repeats=N, --work_dir=DIR). The
# last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in promtool prometheus victoria-metrics; do
  command -v "$tool" >/dev/null || { echo "peers.sh: $tool is missing; run ./setup.sh --all" >&2; exit 1; }
done
./build.sh peers_bench metricsd >/dev/null
exec pg_virtualenv build/bench/peers_bench "$@"

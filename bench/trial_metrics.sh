#!/usr/bin/env bash
# The platform harness's reports benchmark: builds, then runs
# bench/trial_metrics_bench under pg_virtualenv (a throwaway PostgreSQL with
# default settings and durable commits, removed afterwards): the same values
# through the service's stream and as the harness's ReportTrialMetrics
# posts. Arguments go to the benchmark; --helpfull lists them. Takes about
# a minute; the last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh trial_metrics_bench metricsd >/dev/null
exec pg_virtualenv build/bench/trial_metrics_bench "$@"

#!/usr/bin/env bash
# The Python client's benchmark: builds, then runs bench/python_client.py
# under pg_virtualenv (a throwaway PostgreSQL) against its own metricsd.
# Measures record()'s CPU per value beside the C++ Reporter's, profile()'s
# share of a core with 8 fake GPUs, and a 2-hour stream across a metricsd
# outage. Arguments go to the benchmark (--instants, --profile_seconds);
# takes about two minutes; the last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh metricsd metricsctl cpp_reporter fake_nvml_uninstrumented python_client >/dev/null
exec pg_virtualenv /usr/bin/python3 bench/python_client.py "$@"

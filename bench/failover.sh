#!/usr/bin/env bash
# The failover benchmark: builds, then runs bench/failover_bench under
# pg_virtualenv (a throwaway PostgreSQL): two metricsd behind HAProxy (set
# up by setup.sh), the one holding a client's stream killed again and again;
# prints the time from each kill to the first acknowledgement from the other
# and checks every sample was stored once. Then the database round: the
# PostgreSQL primary of a pg_auto_failover formation (setup.sh installs it)
# killed under the same client, and started again (--database_rounds).
# Takes about two minutes; the last line is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh failover_bench metricsd >/dev/null
exec pg_virtualenv build/bench/failover_bench "$@"

#!/usr/bin/env bash
# The README's "First use" lines, run as they are written against a real
# metricsd on a throwaway database of the test PostgreSQL (PG* variables),
# so they cannot rot. They run in a folder laid out as the repository after
# ./run.sh: .data/admin-token holds an admin token, and
# build/client/metrics-agent is the agent, pointed at this metricsd and
# stopped (as Ctrl-C would) once the service has its samples. The one change
# to the lines: localhost:8080 becomes this metricsd's HTTP port.
# Usage: first_use_test.sh <repository root> <metricsd> <metricsctl> <metrics-agent>
set -euo pipefail
root=$1 metricsd=$2 metricsctl=$3 agent=$4

. "$root/tests/testing/db_test_env.sh" first_use_test "$metricsctl"

# The README's block: the lines between "```sh" and "```" under "## First use".
block=$(awk '/^## First use/ {in_section = 1; next} /^## / {in_section = 0}
  in_section && /^```sh/ {in_block = 1; next} in_block && /^```/ {exit}
  in_block {print}' "$root/README.md")
[ -n "$block" ] || fail "README.md has no sh block under \"## First use\""

mkdir -p "$work/repo/.data" "$work/repo/build/client"
"$metricsctl" tokens create --role=admin --name="first use" | tail -n 1 >"$work/repo/.data/admin-token"
# Made first: the loop below may read it before metricsd's shell has opened it.
: >"$work/metricsd.out"
"$metricsd" --grpc-address=127.0.0.1:0 --http-address=127.0.0.1:0 \
  >"$work/metricsd.out" 2>"$work/metricsd.err" &
pid=$!
for _ in $(seq 100); do
  http=$(sed -n 's|.*HTTP listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/metricsd.out")
  grpc=$(sed -n 's|.*gRPC listening on 127.0.0.1:\([0-9]*\).*|\1|p' "$work/metricsd.out")
  [ -n "$http" ] && [ -n "$grpc" ] && break
  sleep 0.1
done
[ -n "$http" ] || fail "metricsd did not start: $(cat "$work/metricsd.err")"

# The agent as the README runs it, against this metricsd; stopped with
# SIGINT once the trial has two CPU samples (10 s at most).
cat >"$work/repo/build/client/metrics-agent" <<EOF
#!/usr/bin/env bash
"$agent" --server=127.0.0.1:$grpc --interval=200ms "\$@" 2>"$work/agent.log" &
agent=\$!
for _ in \$(seq 100); do
  curl -sf -H "Authorization: Bearer \$METRICS_TOKEN" \
    "127.0.0.1:$http/api/v1/trials/7/metrics/system/series" | grep -Eq '"sampleCount":"([2-9]|[1-9][0-9]+)"' && break
  sleep 0.1
done
kill -INT \$agent
wait \$agent
EOF
chmod +x "$work/repo/build/client/metrics-agent"

(cd "$work/repo" && bash -euo pipefail -c "${block//localhost:8080/127.0.0.1:$http}") >"$work/out" \
  || fail "the README's lines failed: $(cat "$work/out" "$work/agent.log" 2>/dev/null)"
grep -q '"id":7' "$work/out" || fail "no trial 7 created: $(cat "$work/out")"
grep -q 'stopped: [0-9]* samples recorded, [0-9]* acknowledged, 0 rejected' "$work/agent.log" \
  || fail "the agent: $(cat "$work/agent.log")"
last=$(tail -n 1 "$work/out")
echo "$last" | grep -q '"name":"cpu_util_simple"' || fail "no CPU series read back: $last"
echo "$last" | grep -Eq '"mean":\[[0-9]' || fail "no CPU values read back: $last"
echo "first use: trial 7 created, sampled and read back"

#!/usr/bin/env bash
# The idle-GPU alert end to end: metricsd exports an active trial whose
# GPU-0 idles (3 %) beside a busy GPU-1 (80 %), a real Prometheus
# (Debian's) scrapes it and evaluates deploy/alerts.yml, with GpuIdle's
# 15 minutes shortened to 5 s (the tunable docs/operating.md, "Alerts",
# names); the alert must fire for GPU-0 alone, naming trial, agent and GPU
# and linking to the trial's page.
# Usage: alerts_end_to_end_test.sh <repository root> <metricsd> <metricsctl>
set -euo pipefail
root=$1 metricsd=$2 metricsctl=$3
. "$root/tests/testing/db_test_env.sh" alerts_end_to_end_test "$metricsctl"

# Made first: the loop below may read it before metricsd's shell has opened it.
: >"$work/metricsd.out"
"$metricsd" --grpc-address=127.0.0.1:0 --http-address=127.0.0.1:0 --auth=off \
  >"$work/metricsd.out" 2>"$work/metricsd.err" &
pid=$!
for _ in $(seq 100); do
  port=$(sed -n 's|.*HTTP listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/metricsd.out")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || fail "metricsd did not start: $(cat "$work/metricsd.err")"
api="http://127.0.0.1:$port/api/v1"
curl -sSf -X POST "$api/trials" -d '{"id": 7}' >/dev/null || fail "trial not created"

# The agent: a report a second, as metrics-agent sends them (an agent quiet
# for --stale-after leaves the export).
(
  for seq in $(seq 1 120); do
    now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
    curl -sS -X POST "$api/trials/7/metrics/system" -d "{
      \"streamId\": \"gpu-host/test\", \"batch\": {\"sequence\": $seq, \"agentId\": \"gpu-host\",
      \"series\": [{\"name\": \"gpu_util\", \"gpuUuid\": \"GPU-0\", \"unit\": \"percent\"},
                   {\"name\": \"gpu_util\", \"gpuUuid\": \"GPU-1\", \"unit\": \"percent\"}],
      \"reports\": [{\"time\": \"$now\", \"values\": [3, 80]}]}}" >>"$work/agent.log" 2>&1
    sleep 1
  done
) &
agent=$!
trap 'kill $agent 2>/dev/null; cleanup' EXIT

# deploy/alerts.yml with GpuIdle's "for" shortened, the rest as shipped.
/usr/bin/python3 - "$root/deploy/alerts.yml" "$work/alerts.yml" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
shortened, n = re.subn(r"(- alert: GpuIdle\n(?:.*\n)*?\s+for: )15m", r"\g<1>5s", text, count=1)
if n != 1:
    sys.exit("GpuIdle's 'for: 15m' not found in deploy/alerts.yml")
open(sys.argv[2], "w").write(shortened)
EOF
prometheus_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
  external_labels:
    metricsd_url: https://metricsd.example
rule_files:
  - $work/alerts.yml
scrape_configs:
  - job_name: metricsd
    static_configs:
      - targets: ["127.0.0.1:$port"]
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prometheus_port" >"$work/prometheus.log" 2>&1 &
prometheus=$!
trap 'kill $agent $prometheus 2>/dev/null; wait $prometheus 2>/dev/null; cleanup' EXIT

# Firing within a minute: Prometheus' start, a scrape, 5 s pending.
verdict=""
for _ in $(seq 60); do
  sleep 1
  verdict=$(curl -sS "http://127.0.0.1:$prometheus_port/api/v1/alerts" 2>/dev/null | /usr/bin/python3 -c '
import json, sys
alerts = [a for a in json.load(sys.stdin)["data"]["alerts"] if a["labels"]["alertname"] == "GpuIdle"]
firing = [a for a in alerts if a["state"] == "firing"]
if not firing:
    sys.exit(1)
for a in firing:
    l = a["labels"]
    print(l["trial_id"], l["agent_id"], l["gpu_uuid"], a["annotations"]["page"])
' 2>/dev/null) && break
done
[ -n "$verdict" ] || fail "GpuIdle did not fire within a minute; Prometheus: $(tail -5 "$work/prometheus.log"); agent: $(tail -3 "$work/agent.log")"
expected="7 gpu-host GPU-0 https://metricsd.example/#/trials/7"
[ "$verdict" = "$expected" ] || fail "GpuIdle fired as '$verdict', not '$expected'"
echo "PASS: GpuIdle fired for the idle GPU alone: $verdict"

#!/usr/bin/env bash
# The export benchmark: builds metricsd and the seeder, then, on a throwaway
# PostgreSQL (pg_virtualenv, removed afterwards), seeds a trial of one agent
# with 8 GPUs (25 series at 1 Hz; --days=7 by default, 15 M values) and
# times, through the HTTP port as a download would run:
#   - the CSV export (GET .../export.csv) of every value,
#   - the trace export (GET .../trace, maxPoints=10000) of the same window,
# against plain COPY (SELECT ...) TO STDOUT of the same data in the same run:
# of the stored rows as they are (sealed windows and packed rows; the floor
# of reading them), every closed window sealed first, and of
# one line per value through the migrations' metrics_unpacked view (what the
# CSV is, in plain SQL). Each is run twice and the faster kept (the first
# also warms the cache). Values/s are of the values the window holds. The
# last line is JSON. Takes about 3 minutes for 7 days.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${EXPORT_BENCH_INNER:-}" ]]; then
  ./build.sh metricsd metricsctl page_seed >/dev/null
  EXPORT_BENCH_INNER=1 exec pg_virtualenv "$0" "$@"
fi

days=7
for arg in "$@"; do
  case "$arg" in
    --days=*) days="${arg#--days=}" ;;
    *) echo "usage: bench/export.sh [--days=N]" >&2; exit 2 ;;
  esac
done
seconds=$((days * 86400))
db=export_bench
createdb "$db"
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; dropdb --if-exists "$db"' EXIT
build/server/metricsd --database-url="dbname=$db" --migrate --auth=off \
  --grpc-address=127.0.0.1:0 --http-address=127.0.0.1:0 >"$work/out" 2>"$work/log" &
pid=$!
for _ in $(seq 300); do
  grep -q "HTTP listening" "$work/out" 2>/dev/null && break
  sleep 0.1
done
grpc=$(sed -n 's/.*gRPC listening on \([^ ]*\).*/\1/p' "$work/out")
http=$(sed -n 's|.*HTTP listening on http://\([^ ]*\).*|\1|p' "$work/out")
[[ -n "$grpc" && -n "$http" ]] || { cat "$work/log" >&2; exit 1; }

start=$(date +%s)
build/bench/page_seed --target="$grpc" --trial=1 --seconds="$seconds" >&2
echo "seeded $days days ($((seconds * 25)) values) in $(($(date +%s) - start)) s" >&2
# Every closed window sealed, as a running metricsd leaves a week behind it.
build/ctl/metricsctl --database-url="dbname=$db" seal >&2
psql -X -q -d "$db" -c "VACUUM ANALYZE" >/dev/null
values=$((seconds * 25))

# Seconds and bytes of the faster of two runs of a command writing to stdout.
timed() {
  local best=0 bytes=0 t0 n ns
  for _ in 1 2; do
    t0=$(date +%s%N)
    n=$("$@" | wc -c)
    ns=$(($(date +%s%N) - t0))
    if ((best == 0 || ns < best)); then best=$ns; bytes=$n; fi
  done
  echo "$((best / 1000000000)).$(printf %03d $((best % 1000000000 / 1000000)))" "$bytes"
}
api="http://$http/api/v1/trials/1/metrics/system"
read -r csv_s csv_bytes < <(timed curl -sf "$api/export.csv")
read -r trace_s trace_bytes < <(timed curl -sf "$api/trace?maxPoints=10000")
rows_sql="COPY (SELECT end_time, agent_id, coalesce(packed_values, sealed_values) FROM metrics WHERE trial_id = 1 AND metric_group = 'system' ORDER BY end_time, id) TO STDOUT"
values_sql="COPY (SELECT m.end_time, m.agent_id, coalesce(g.key, ''), e.key, coalesce(g.value, e.value) FROM metrics_unpacked m CROSS JOIN jsonb_each(m.metrics) e LEFT JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(e.value) = 'object' THEN e.value END) g ON true WHERE m.trial_id = 1 AND m.metric_group = 'system' ORDER BY m.end_time, m.id) TO STDOUT WITH CSV"
read -r rows_s rows_bytes < <(timed psql -X -q -d "$db" -c "$rows_sql")
read -r copy_s copy_bytes < <(timed psql -X -q -d "$db" -c "$values_sql")
lines=$(curl -sf "$api/export.csv" | wc -l)
[[ "$lines" == "$((values + 1))" ]] || { echo "the CSV has $lines lines, not $((values + 1))" >&2; exit 1; }

/usr/bin/python3 - "$days" "$values" "$csv_s" "$csv_bytes" "$trace_s" "$trace_bytes" \
  "$rows_s" "$rows_bytes" "$copy_s" "$copy_bytes" <<'PY'
import json, sys
days, values = int(sys.argv[1]), int(sys.argv[2])
csv_s, csv_b, trace_s, trace_b, rows_s, rows_b, copy_s, copy_b = map(float, sys.argv[3:])
rate = lambda s: values / s
print("%-42s %8s %14s %10s" % ("", "seconds", "values/s", "MB"))
for name, s, b in (("CSV export (GET .../export.csv)", csv_s, csv_b),
                   ("trace export (maxPoints=10000)", trace_s, trace_b),
                   ("COPY of the stored rows (sealed, packed)", rows_s, rows_b),
                   ("COPY of one line per value (SQL view)", copy_s, copy_b)):
    print("%-42s %8.2f %14.0f %10.1f" % (name, s, rate(s), b / 1e6))
print(json.dumps({
    "days": days, "values": values,
    "csv_values_per_s": round(rate(csv_s)), "csv_mb": round(csv_b / 1e6, 1),
    "trace_values_per_s": round(rate(trace_s)), "trace_mb": round(trace_b / 1e6, 1),
    "copy_rows_values_per_s": round(rate(rows_s)),
    "copy_values_values_per_s": round(rate(copy_s)),
    "csv_ratio_to_copy_rows": round(rows_s / csv_s, 2),
    "csv_ratio_to_copy_values": round(copy_s / csv_s, 2)}))
PY

#!/usr/bin/env bash
# docker-compose's security wiring without Docker: runs the "secrets"
# service's script (deploy/init-secrets.sh) against a throwaway database of
# the test PostgreSQL (PG* variables), starts metricsd with the certificate
# it made, as docker-compose.yml does, and scrapes /metrics the way
# deploy/prometheus.yml says (TLS trusting the stack's CA for the name
# "metricsd", the viewer token); promtool checks that configuration and the
# page, haproxy the load balancer's. A second run of the script changes
# nothing.
# Usage: compose_secrets_test.sh <repository root> <metricsd> <metricsctl>
set -euo pipefail
root=$1 metricsd=$2 metricsctl=$3
. "$root/tests/testing/db_test_env.sh" compose_secrets_test "$metricsctl"
secrets="$work/secrets"
SECRETS_DIR=$secrets SECRETS_OWNER=$(id -u) METRICSCTL=$metricsctl \
  sh "$root/deploy/init-secrets.sh" >"$work/init.log"
for f in ca.pem server.pem server.key admin-token prometheus-token; do
  [ -s "$secrets/$f" ] || fail "init-secrets made no $f"
done
[ "$(stat -c %a "$secrets/server.key")" = 600 ] || fail "server.key is not mode 0600"
[ "$(stat -c %a "$secrets/admin-token")" = 600 ] || fail "admin-token is not mode 0600"
before=$(sha256sum "$secrets"/* | sha256sum)
SECRETS_DIR=$secrets SECRETS_OWNER=$(id -u) METRICSCTL=$metricsctl \
  sh "$root/deploy/init-secrets.sh" >/dev/null
[ "$(sha256sum "$secrets"/* | sha256sum)" = "$before" ] || fail "a second run changed the secrets"
[ "$("$metricsctl" tokens list | grep -c 'docker-compose')" = 2 ] || fail "tokens made twice"

# Made first: the loop below may read it before metricsd's shell has opened it.
: >"$work/metricsd.out"
"$metricsd" --grpc-address=127.0.0.1:0 --http-address=127.0.0.1:0 \
  --tls-cert="$secrets/server.pem" --tls-key="$secrets/server.key" \
  >"$work/metricsd.out" 2>"$work/metricsd.err" &
pid=$!
for _ in $(seq 100); do
  port=$(sed -n 's|.*HTTP listening on https://127.0.0.1:\([0-9]*\).*|\1|p' "$work/metricsd.out")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || fail "metricsd did not start: $(cat "$work/metricsd.err")"

# Prometheus' configuration, pointed at this test's files.
# The rules file where docker-compose mounts it: promtool checks it too.
sed -e "s|/secrets/|$secrets/|g" -e "s|/etc/prometheus/alerts.yml|$root/deploy/alerts.yml|" \
  "$root/deploy/prometheus.yml" >"$work/prometheus.yml"
promtool check config "$work/prometheus.yml" >/dev/null || fail "promtool rejects prometheus.yml"
grep -q 'server_name: metricsd' "$work/prometheus.yml" || fail "prometheus.yml does not name metricsd"

# The load balancer's configuration, with this CA: HAProxy must accept it
# (the replicas' names resolve only inside the stack: HAProxy starts them
# disabled here, and says so in warnings).
sed "s|/secrets/|$secrets/|g" "$root/deploy/haproxy.cfg" >"$work/haproxy.cfg"
haproxy -c -q -f "$work/haproxy.cfg" || fail "haproxy rejects deploy/haproxy.cfg"

scrape() {
  curl -sS --cacert "$secrets/ca.pem" --resolve "metricsd:$port:127.0.0.1" "$@" \
    "https://metricsd:$port/metrics"
}
code=$(scrape -o "$work/metrics.txt" -w '%{http_code}' \
  -H "Authorization: Bearer $(cat "$secrets/prometheus-token")")
[ "$code" = 200 ] || fail "scrape with the Prometheus token: HTTP $code"
promtool check metrics <"$work/metrics.txt" >/dev/null 2>&1 || fail "promtool rejects /metrics"
code=$(scrape -o /dev/null -w '%{http_code}')
[ "$code" = 401 ] || fail "scrape without a token: HTTP $code, not 401"
# The page's address docs/operating.md gives for the stack, from the host.
code=$(curl -sS --cacert "$secrets/ca.pem" -o /dev/null -w '%{http_code}' \
  -H "Authorization: Bearer $(cat "$secrets/admin-token")" \
  "https://localhost:$port/api/v1/trials")
[ "$code" = 200 ] || fail "admin token over https://localhost: HTTP $code"
for t in admin-token prometheus-token; do
  if grep -qF "$(cut -c5-36 "$secrets/$t")" "$work"/*.out "$work"/*.err "$work/init.log"; then
    fail "the $t appears in a log"
  fi
done
echo "PASS: secrets made once, metricsd over TLS, scraped with the viewer token"

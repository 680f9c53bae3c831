#!/bin/sh
# docker-compose's one-shot "secrets" service (also run by
# tests/compose_secrets_test.sh): on the first run, makes what the stack's
# TLS and tokens need in $SECRETS_DIR (default /secrets), and leaves it as
# it is on later runs:
#   ca.pem, ca.key          a CA of this stack alone (import ca.pem into a
#                           browser to trust the page)
#   server.pem, server.key  metricsd's certificate, for the names
#                           "metricsd" (inside the stack), "localhost" and
#                           127.0.0.1 (from the host)
#   admin-token             an admin API token (the page and the platform)
#   prometheus-token        a viewer API token Prometheus scrapes /metrics with
# Files are readable by $SECRETS_OWNER only (default 65534, "nobody": the
# user metricsd's and Prometheus' images run as).
set -eu
dir=${SECRETS_DIR:-/secrets}
owner=${SECRETS_OWNER:-65534}
metricsctl=${METRICSCTL:-metricsctl}
umask 077
mkdir -p "$dir"

if [ ! -s "$dir/server.pem" ]; then
  echo "init-secrets: making a CA and metricsd's certificate in $dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -days 3650 -subj "/CN=metrics-service local CA" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=metricsd" -keyout "$dir/server.key" -out "$dir/server.csr" \
    2>/dev/null
  printf 'subjectAltName=DNS:metricsd,DNS:localhost,IP:127.0.0.1\n' \
    >"$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" \
    -CAkey "$dir/ca.key" -CAcreateserial -days 825 \
    -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
  rm -f "$dir/server.csr" "$dir/server.ext"
fi

for pair in admin:admin prometheus:viewer; do
  name=${pair%%:*}
  role=${pair#*:}
  if [ ! -s "$dir/$name-token" ]; then
    echo "init-secrets: creating the $name token ($role) in $dir/$name-token"
    "$metricsctl" tokens create --role="$role" --name="docker-compose $name" \
      | tail -n 1 >"$dir/$name-token.new"
    [ -s "$dir/$name-token.new" ] || exit 1  # metricsctl said why
    mv "$dir/$name-token.new" "$dir/$name-token"
  fi
done

chmod 0644 "$dir/ca.pem"
chown "$owner" "$dir"/* 2>/dev/null || true
echo "init-secrets: ready; the page: https://localhost:8080/#token=\$(cat $dir/admin-token)"

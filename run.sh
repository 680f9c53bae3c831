#!/usr/bin/env bash
# Sets everything up and runs metricsd on this machine:
#   1. installs the Debian packages (setup.sh) and builds (build.sh);
#   2. unless DATABASE_URL is set, creates a local PostgreSQL cluster in
#      .data/ (git-ignored; reused on later runs), starts it if it is not
#      running, and creates the database "metrics";
#   3. applies pending migrations (metricsctl migrate up);
#   4. on the first run for a database, creates an admin API token and
#      keeps it in .data/admin-token (mode 0600; with DATABASE_URL set,
#      .data/admin-token-<hash of DATABASE_URL>); every run
#      prints the profiler page's address with it (the page takes it from
#      the address once, then removes it from the address bar);
#   5. runs metricsd in the foreground until Ctrl-C, passing on any
#      arguments (e.g. ./run.sh --http-address=0.0.0.0:8080 --tls-cert=...
#      --tls-key=...).
# The cluster keeps running after metricsd stops; "./run.sh --stop-db"
# stops it.
set -euo pipefail
cd "$(dirname "$0")"
root=$(pwd)
data="$root/.data"
pgdata="$data/pg"
socket_dir="$data/run"
pg_port=5432

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)

# The cluster's owner: the current user, or "postgres" when run as root
# (PostgreSQL refuses to run as root).
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ "${1:-}" = "--stop-db" ]; then
  if [ -f "$pgdata/postmaster.pid" ]; then
    as_owner "$pg_bin/pg_ctl" -D "$pgdata" -m fast stop
  else
    echo "run.sh: the local PostgreSQL in $pgdata is not running"
  fi
  exit 0
fi

./build.sh metricsd metricsctl
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

token_file="$data/admin-token"
if [ -n "${DATABASE_URL:-}" ]; then
  # One file per database, so a token is never offered to a database that
  # does not know it.
  token_file="$data/admin-token-$(printf '%s' "$DATABASE_URL" | sha256sum | cut -c1-12)"
fi

if [ -z "${DATABASE_URL:-}" ]; then
  mkdir -p "$data"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$data"
    if ! runuser -u postgres -- test -x "$data"; then
      echo "run.sh: user postgres cannot reach $data; move the project to a" \
        "directory others can enter, or set DATABASE_URL" >&2
      exit 1
    fi
  fi
  if [ ! -f "$pgdata/PG_VERSION" ]; then
    echo "run.sh: creating a local PostgreSQL cluster in $pgdata"
    as_owner mkdir -p "$pgdata" "$socket_dir"
    as_owner "$pg_bin/initdb" -D "$pgdata" -U metrics -E UTF8 \
      --auth-local=trust --auth-host=reject >/dev/null
  fi
  as_owner mkdir -p "$socket_dir"
  if ! as_owner "$pg_bin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
    echo "run.sh: starting PostgreSQL (socket in $socket_dir, log in $data/postgresql.log)"
    # Unix socket only: nothing listens on the network, and no port clashes
    # with a system PostgreSQL.
    as_owner "$pg_bin/pg_ctl" -D "$pgdata" -l "$data/postgresql.log" -w \
      -o "-c listen_addresses='' -c unix_socket_directories='$socket_dir' -p $pg_port" \
      start >/dev/null
  fi
  if [ "$(psql -h "$socket_dir" -p $pg_port -U metrics -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'metrics'")" != "1" ]; then
    createdb -h "$socket_dir" -p $pg_port -U metrics metrics
  fi
  export DATABASE_URL="host=$socket_dir port=$pg_port user=metrics dbname=metrics"
  echo "run.sh: PostgreSQL is up: DATABASE_URL=\"$DATABASE_URL\""
fi

build/ctl/metricsctl migrate up

mkdir -p "$data"
if [ ! -s "$token_file" ]; then
  if ! created=$(build/ctl/metricsctl tokens create --role=admin \
      --name="run.sh admin ($(hostname))" 2>&1); then
    echo "$created" >&2
    exit 1
  fi
  (umask 077 && printf '%s\n' "${created##*$'\n'}" >"$token_file.new")
  mv "$token_file.new" "$token_file"
  echo "run.sh: created an admin API token, kept in $token_file (mode 0600)"
fi
admin_token=$(cat "$token_file")

# The page's address, from the arguments metricsd gets.
http_address=127.0.0.1:8080
scheme=http
auth=required
for arg in "$@"; do
  case "$arg" in
    --http-address=*|--http_address=*) http_address=${arg#*=} ;;
    --tls-cert=*|--tls_cert=*) scheme=https ;;
    --auth=*) auth=${arg#*=} ;;
  esac
done
case "$http_address" in
  0.0.0.0:*|:*) http_address="127.0.0.1:${http_address##*:}" ;;
esac
if [ "$auth" = "off" ]; then
  echo "run.sh: the profiler page: $scheme://$http_address/"
else
  echo "run.sh: the profiler page (signs in with the admin token):"
  echo "  $scheme://$http_address/#token=$admin_token"
  echo "run.sh: the token is also in $token_file (send it as" \
    "\"authorization: Bearer <token>\"); make narrower ones with" \
    "build/ctl/metricsctl tokens create"
fi
echo "run.sh: starting metricsd (Ctrl-C stops it)"
exec build/server/metricsd "$@"

#!/bin/sh
# One pg_auto_failover process of docker-compose.yml, run as the postgres
# user: the monitor (PGAF_ROLE=monitor) or a database node (PGAF_ROLE=node;
# the first to start becomes the primary, the next its synchronous standby).
# The first start, on an empty volume, creates it; every start then runs it
# (`pg_autoctl run`: the keeper starts PostgreSQL and follows the monitor).
# Passwords (scram-sha-256, over TLS with self-signed certificates):
#   AUTOCTL_NODE_PASSWORD  the nodes' login to the monitor (autoctl_node)
#   REPLICATION_PASSWORD   a standby's login to its primary
#   METRICS_PASSWORD       the role `metrics` that metricsd logs in as, made
#                          on the first primary with the pg_monitor role
# PGAF_HOSTNAME (default: the container's name), PGAF_NAME (the node's name
# in the formation: PGAF_HOSTNAME), PGAF_PORT (5432) and PGAF_MONITOR
# (pg-monitor:5432) say where things are; docs/operating.md,
# "When the database primary dies", explains the topology.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
: "${PGAF_HOSTNAME:=$(hostname)}"
: "${PGAF_NAME:=$PGAF_HOSTNAME}"
: "${PGAF_PORT:=5432}"
: "${PGAF_MONITOR:=pg-monitor:5432}"
export PGDATA
config="${XDG_CONFIG_HOME:-$HOME/.config}/pg_autoctl$PGDATA/pg_autoctl.cfg"

# Runs SQL on the local server, started for it on its Unix socket only.
local_sql() {
  pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -p $PGAF_PORT" start >/dev/null
  psql -X -v ON_ERROR_STOP=1 -q -p "$PGAF_PORT" -d "$1" -c "$2"
  pg_ctl -D "$PGDATA" -w stop >/dev/null
}

if [ ! -f "$config" ]; then
  case "$PGAF_ROLE" in
    monitor)
      pg_autoctl create monitor --pgdata "$PGDATA" --pgport "$PGAF_PORT" \
        --hostname "$PGAF_HOSTNAME" --auth scram-sha-256 --ssl-self-signed
      local_sql pg_auto_failover \
        "ALTER USER autoctl_node PASSWORD '$AUTOCTL_NODE_PASSWORD'"
      ;;
    node)
      # A standby's base backup logs in to the primary as the replicator.
      PGPASSWORD=$REPLICATION_PASSWORD pg_autoctl create postgres \
        --pgdata "$PGDATA" --pgport "$PGAF_PORT" --hostname "$PGAF_HOSTNAME" \
        --name "$PGAF_NAME" --dbname metrics --auth scram-sha-256 \
        --ssl-self-signed --pg-hba-lan \
        --monitor "postgres://autoctl_node:$AUTOCTL_NODE_PASSWORD@$PGAF_MONITOR/pg_auto_failover?sslmode=require"
      pg_autoctl config set --pgdata "$PGDATA" replication.password "$REPLICATION_PASSWORD"
      if [ ! -f "$PGDATA/standby.signal" ]; then
        # The first node, the primary: the roles, which standbys copy.
        local_sql metrics "ALTER USER pgautofailover_replicator PASSWORD '$REPLICATION_PASSWORD';
          CREATE ROLE metrics LOGIN PASSWORD '$METRICS_PASSWORD';
          GRANT pg_monitor TO metrics;
          ALTER DATABASE metrics OWNER TO metrics;
          ALTER SCHEMA public OWNER TO metrics;"
      fi
      ;;
    *) echo "pg-auto-failover.sh: PGAF_ROLE must be monitor or node" >&2; exit 2 ;;
  esac
fi
exec pg_autoctl run --pgdata "$PGDATA"

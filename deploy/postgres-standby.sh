#!/bin/sh
# The hot standby of docker-compose.yml. On its first start (an empty
# volume) it copies the primary with pg_basebackup -R, which also writes
# standby.signal and the connection to stream from, and creates the
# physical replication slot "metrics_standby" so the primary keeps the WAL
# the standby has not received (bounded by the primary's
# max_slot_wal_keep_size). Then it runs PostgreSQL, replaying the primary's
# changes and answering read-only queries. PGPASSWORD is the primary's
# password; the walreceiver uses it too. Runs as root to own the volume,
# then as postgres.
set -eu
: "${PGDATA:?}" "${PRIMARY_HOST:?}" "${PRIMARY_USER:?}"
mkdir -p "$PGDATA"
chown postgres:postgres "$PGDATA"
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -q -h "$PRIMARY_HOST" -U "$PRIMARY_USER"; do sleep 1; done
  slot=metrics_standby
  # A slot left by an earlier standby whose volume is gone: start afresh.
  psql -h "$PRIMARY_HOST" -U "$PRIMARY_USER" -d postgres -qAt -c \
    "SELECT pg_drop_replication_slot('$slot') FROM pg_replication_slots WHERE slot_name = '$slot' AND NOT active"
  gosu postgres pg_basebackup -h "$PRIMARY_HOST" -U "$PRIMARY_USER" \
    -D "$PGDATA" -R -X stream -C -S "$slot" --progress
fi
exec gosu postgres postgres

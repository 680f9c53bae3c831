#!/bin/sh
# Run once by the postgres image when it creates the primary's cluster
# (/docker-entrypoint-initdb.d): lets the standby connect for streaming
# replication, with the same user and password as metricsd. A volume made
# before this script existed lacks the line: add it by hand, or recreate it.
set -eu
echo "host replication ${POSTGRES_USER} all scram-sha-256" >> "$PGDATA/pg_hba.conf"

# docker-compose.yml's database monitor and nodes: PostgreSQL 15 and
# pg_auto_failover from Debian 12's packages, run as the postgres user by
# deploy/pg-auto-failover.sh (mounted at /deploy).
FROM debian:12-slim
# postgresql-common first, told not to make a cluster of its own: the
# entrypoint makes the only one, in the volume.
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-common \
 && sed -i 's/^#\?create_main_cluster.*/create_main_cluster = false/' /etc/postgresql-common/createcluster.conf \
 && apt-get install -y --no-install-recommends postgresql-15 \
      postgresql-15-auto-failover pg-auto-failover-cli \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
USER postgres
WORKDIR /var/lib/postgresql
ENTRYPOINT ["/bin/sh", "/deploy/pg-auto-failover.sh"]

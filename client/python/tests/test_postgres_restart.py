"""Exactly once across a PostgreSQL restart: the server loses its database
under a streaming Reporter, which buffers and resends; every acknowledged
value is stored once. Restarts the PostgreSQL every test shares, so it runs
alone (ctest's PythonClientPostgresRestartTest)."""
import os
import subprocess

import pytest

from conftest import psql
from test_reporter import stream_through


def restart_postgres(db):
    """pg_ctl restart -m fast, as the owner of the data directory."""
    [[data_dir]] = psql(db, "SHOW data_directory")
    [[bin_dir]] = psql(db, "SELECT setting FROM pg_config WHERE name = 'BINDIR'")
    command = [os.path.join(bin_dir, "pg_ctl"), "-D", data_dir, "-l",
               os.path.join(data_dir, "restart-by-test.log"), "-m", "fast", "-w",
               "-t", "60", "restart"]
    owner = os.stat(data_dir).st_uid
    if os.geteuid() != owner:
        import pwd
        command = ["runuser", "-u", pwd.getpwuid(owner).pw_name, "--"] + command
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


@pytest.mark.postgres_restart
def test_exactly_once_across_a_postgres_restart(metricsd, trial):
    stream_through(metricsd, trial, lambda r: restart_postgres(metricsd.db))

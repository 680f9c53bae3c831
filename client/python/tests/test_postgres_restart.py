"""Exactly once across a PostgreSQL restart: the server loses its database
under a streaming Reporter, which buffers and resends; every acknowledged
value is stored once. Restarts the PostgreSQL every test shares, so it runs
alone (ctest's PythonClientPostgresRestartTest)."""
import os
import subprocess
import threading
import time

import pytest

from conftest import psql
from test_reporter import _assert_each_instant_once, _record_steadily, reporter


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
    r = reporter(metricsd, trial, batch_size=200, max_age=0.05)
    stop = threading.Event()
    thread, count = _record_steadily(r, stop)
    try:
        time.sleep(0.8)
        restart_postgres(metricsd.db)
        time.sleep(1.5)
    finally:
        stop.set()
        thread.join()
    r.flush(timeout=120)
    stats = r.close()
    assert stats.recorded == stats.acknowledged == 2 * count[0]
    _assert_each_instant_once(metricsd, trial, count[0])

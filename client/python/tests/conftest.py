"""Fixtures of the Python client's tests: real metricsd processes, each on
its own throwaway database of the PostgreSQL that test.sh starts (the PG*
variables), with authentication on and an admin token minted by metricsctl;
and SQL over what was stored, independent of the code that stored it.

The paths come from the environment CMake sets (tests/CMakeLists.txt).
"""
import atexit
import os
import re
import signal
import subprocess
import tempfile
import time
import uuid

import pytest

METRICSD = os.environ.get("METRICSD", "")
METRICSCTL = os.environ.get("METRICSCTL", "")
CPP_REPORTER = os.environ.get("CPP_REPORTER", "")
FAKE_NVML = os.environ.get("FAKE_NVML", "")
CLIENT_TESTDATA = os.environ.get("CLIENT_TESTDATA", "")
REPO_ROOT = os.environ.get("REPO_ROOT", "")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "postgres_restart: restarts the shared PostgreSQL (runs alone)")


def psql(db, sql):
    """The rows of `sql` on database `db`, as lists of strings."""
    out = subprocess.run(["psql", "-X", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                          "-d", db, "-c", sql],
                         check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


_template = None


def migrated_template():
    """A database with the migrations applied, made once a test process and
    dropped at its exit: each server's database is a copy of it, which takes
    a fraction of migrating it again."""
    global _template
    if _template is None:
        name = "pyclient_template_%d" % os.getpid()
        subprocess.run(["createdb", name], check=True)
        atexit.register(subprocess.run, ["dropdb", "--if-exists", name], check=False)
        subprocess.run([METRICSCTL, "--database-url", "dbname=" + name, "migrate", "up"],
                       check=True, capture_output=True)
        _template = name
    return _template


class Metricsd:
    """A metricsd process on its own database; kill() and start() again keep
    the database and the gRPC port, as a crashed and restarted server."""

    def __init__(self, flags=()):
        self.db = "pyclient_%d_%s" % (os.getpid(), uuid.uuid4().hex[:8])
        subprocess.run(["createdb", "--strategy=file_copy", "-T", migrated_template(), self.db],
                       check=True)
        # A stop waits out the shutdown grace while any client keeps a
        # connection open, even an idle one (the admin fixture's): gRPC's
        # shutdown waits for clients to close theirs, and an idle Python
        # channel closes late. 1 s instead of the default 10 s (5 s seen) for
        # each stop of a server made to be away.
        self.flags = ["--shutdown-grace=1s"] + list(flags)
        self.grpc_port = 0
        self.proc = None
        self.log = tempfile.NamedTemporaryFile(mode="w+", prefix="metricsd-", suffix=".log")
        self.start()
        self.admin_token = self.mint_token("admin")

    @property
    def address(self):
        return "127.0.0.1:%d" % self.grpc_port

    def start(self):
        self.proc = subprocess.Popen(
            [METRICSD, "--database-url", "dbname=" + self.db, "--migrate",
             "--grpc-address", "127.0.0.1:%d" % self.grpc_port,
             "--http-address", "127.0.0.1:0"] + self.flags,
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"gRPC listening on \S*:(\d+)", line)
            if m:
                self.grpc_port = int(m.group(1))
                return
        self.proc.kill()
        raise RuntimeError("metricsd did not start: " + self.log_text())

    def log_text(self):
        self.log.seek(0)
        return self.log.read()

    def kill(self):
        """SIGKILL: no goodbye to the clients, no shutdown."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def mint_token(self, role, trial_id=None):
        args = [METRICSCTL, "--database-url", "dbname=" + self.db, "tokens", "create",
                "--role=" + role]
        if trial_id is not None:
            args.append("--trial=%d" % trial_id)
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        return out.strip().splitlines()[-1]

    def sql(self, query):
        return psql(self.db, query)

    def stored(self, trial_id):
        """Every raw value of the trial: (agent, time_us, gpu, name, value)
        rows, in SQL over the metrics table's rows (packed ones decoded by
        the migrations' own view; a per-GPU series is an object of GPU UUID
        to value there)."""
        rows = self.sql(
            "SELECT m.agent_id, (extract(epoch FROM m.end_time) * 1000000)::bigint, "
            "  coalesce(g.key, ''), e.key, coalesce(g.value, e.value)::text "
            "FROM metrics_unpacked m CROSS JOIN jsonb_each(m.metrics) e "
            "LEFT JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(e.value) = 'object' "
            "  THEN e.value END) g ON true "
            "WHERE m.trial_id = %d AND m.metric_group = 'system'" % trial_id)
        return [(a, int(t), gpu, name, float(v)) for a, t, gpu, name, v in rows]

    def close(self):
        self.stop()
        subprocess.run(["dropdb", "--if-exists", self.db], check=False)


@pytest.fixture
def metricsd():
    server = Metricsd()
    yield server
    server.close()


@pytest.fixture
def admin(metricsd):
    from metrics_client import Client
    with Client(metricsd.address, token=metricsd.admin_token) as client:
        yield client


_next_trial = [100]


@pytest.fixture
def trial(admin):
    """A new active trial's id."""
    _next_trial[0] += 1
    return admin.create_trial(_next_trial[0]).id

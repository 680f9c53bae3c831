"""Reporter against a real metricsd: what is recorded is stored once, with
the right series, across server kills; errors are told apart as the docs
say; the buffer and close behave as documented; a forked child never
touches the parent's stream."""
import json
import logging
import os
import signal
import threading
import time

import grpc
import pytest

from conftest import CLIENT_TESTDATA
from eventually import eventually
from metrics_client import (BufferFullError, PermanentError, Reporter,
                            ReporterClosedError)

BASE = 1_790_000_000.0  # a fixed instant in the past (2026-09-21), seconds


def reporter(metricsd, trial, **options):
    token = options.pop("token", None) or metricsd.mint_token("reporter", trial)
    options.setdefault("agent_id", "host-a")
    options.setdefault("initial_backoff", 0.05)
    options.setdefault("max_backoff", 0.5)
    return Reporter(metricsd.address, trial, token=token, **options)


def test_values_series_and_units_are_stored_once(metricsd, admin, trial):
    with reporter(metricsd, trial) as r:
        for i in range(50):
            r.record({"loss": 1.0 / (i + 1), "throughput": (1000.0 + i, "samples/s")},
                     time=BASE + i)
            r.record({"gpu_util": (10.0 * (i % 10), "percent")}, time=BASE + i,
                     gpu="GPU-0000-aaaa")
        r.flush(timeout=30)
        stats = r.stats
    assert stats.recorded == stats.acknowledged == 150
    assert stats.dropped == stats.rejected == stats.unsent == stats.buffered == 0
    stored = metricsd.stored(trial)
    assert len(stored) == 150
    assert sorted((t, v) for a, t, gpu, name, v in stored if name == "throughput") == [
        (int((BASE + i) * 1e6), 1000.0 + i) for i in range(50)]
    assert {(gpu, name) for a, t, gpu, name, v in stored} == {
        ("", "loss"), ("", "throughput"), ("GPU-0000-aaaa", "gpu_util")}
    units = {(s.name, s.gpu_uuid): (s.unit, s.sample_count) for s in admin.list_series(trial)}
    assert units == {("loss", ""): ("", 50), ("throughput", ""): ("samples/s", 50),
                     ("gpu_util", "GPU-0000-aaaa"): ("percent", 50)}


def test_every_shared_label_case_is_refused_or_taken_at_record(metricsd, trial):
    """client/testdata/labels.json, the cases the server and the C++ Reporter
    are tested on: a series name, GPU UUID or unit refused with the server's
    reason, or recorded."""
    with open(os.path.join(CLIENT_TESTDATA, "labels.json")) as f:
        cases = json.load(f)["cases"]
    with reporter(metricsd, trial) as r:
        taken = 0
        for n, case in enumerate(cases):
            if case.get("allow_empty"):
                continue
            value, problem = case["value"], case.get("problem")
            if case["max"] == 32:  # a series of its own: a series' unit is fixed
                attempts = [lambda: r.record({"unit_case_%d" % n: (1.0, value)}, time=BASE)]
            else:
                attempts = [lambda: r.record({value: 1.0}, time=BASE),
                            lambda: r.record({"ok": 1.0}, time=BASE, gpu=value)]
                if not value:
                    attempts.pop()  # an agent-wide value has gpu=None
            for attempt in attempts:
                if problem is None:
                    attempt()
                    taken += 1
                    continue
                with pytest.raises(ValueError) as e:
                    attempt()
                assert problem in str(e.value), (value, str(e.value))
        assert r.stats.recorded == taken


def test_bad_values_are_refused_whole_and_named(metricsd, trial):
    with reporter(metricsd, trial) as r:
        r.record({"memory_free": (1.0, "bytes")}, time=BASE)
        cases = [
            # Series already known take a faster check; it must refuse alike.
            ({"memory_free": float("inf")}, ValueError, "'memory_free'"),
            ({"memory_free": True}, TypeError, "'memory_free'"),
            ({"memory_free": 7}, None, None),  # an int is a number
            ({"ok": 1.0, "loss": float("nan")}, ValueError, "'loss'"),
            ({"ok": 1.0, "loss": "0.5"}, TypeError, "'loss'"),
            ({"ok": 1.0, "": 2.0}, ValueError, "must not be empty"),
            ({"ok": 1.0, "x" * 129: 2.0}, ValueError, "the limit is 128"),
            ({"ok": 1.0, "memory_free": (2.0, "percent")}, ValueError, "differs"),
            ({"ok": 1.0, "caf\u00e9": 2.0}, ValueError, "printable ASCII"),
        ]
        for values, error, text in cases:
            if error is None:
                r.record(values, time=BASE + 2)
                continue
            with pytest.raises(error, match=text):
                r.record(values, time=BASE + 1)
        with pytest.raises(ValueError, match="time"):
            r.record({"ok": 1.0}, time="yesterday")
        with pytest.raises(TypeError, match="values: must be a dict"):
            r.record([("ok", 1.0)])
        with pytest.raises(ValueError, match="gpu"):
            r.record({"ok": 1.0}, gpu="")
        r.flush(timeout=30)
        assert r.stats.recorded == 2
    assert sorted((name, v) for a, t, g, name, v in metricsd.stored(trial)) == [
        ("memory_free", 1.0), ("memory_free", 7.0)]


def stream_through(metricsd, trial, disturb):
    """Records instants 0, 1, 2, ... steadily on another thread while
    `disturb(reporter)` runs, then flushes and checks in SQL that every instant was
    acknowledged and stored exactly once. Returns the final stats."""
    r = reporter(metricsd, trial, batch_size=200, max_age=0.05)
    stop = threading.Event()
    count = [0]

    def run():
        while not stop.is_set():
            r.record({"step": float(count[0]), "loss": 1.0}, time=BASE + count[0] * 0.001)
            count[0] += 1
            if count[0] % 50 == 0:
                time.sleep(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert eventually(lambda: r.stats.acknowledged >= 200, timeout=30)
        disturb(r)
        # Acknowledgements go on after the disturbance.
        settled = r.stats.acknowledged
        assert eventually(lambda: r.stats.acknowledged >= settled + 200, timeout=60)
    finally:
        stop.set()
        thread.join()
    r.flush(timeout=120)
    stats = r.close()
    assert stats.recorded == stats.acknowledged == 2 * count[0]
    _assert_each_instant_once(metricsd, trial, count[0])
    return stats


def _assert_each_instant_once(metricsd, trial, instants):
    stored = metricsd.stored(trial)
    steps = sorted(v for a, t, g, name, v in stored if name == "step")
    assert len(steps) == instants, "stored %d of %d instants" % (len(steps), instants)
    assert steps == [float(i) for i in range(instants)], "a value lost or stored twice"
    assert len(stored) == 2 * instants


def test_exactly_once_across_metricsd_kills(metricsd, trial):
    def kill_and_restart_three_times(r):
        for _ in range(3):
            # Frozen first, so the kill finds batches sent and not yet
            # acknowledged (a quick server had acknowledged everything).
            metricsd.proc.send_signal(signal.SIGSTOP)
            time.sleep(0.2)  # the window in which batches are sent and not acknowledged
            metricsd.kill()  # mid-stream: batches in flight are lost with it
            time.sleep(0.3)  # an outage the Reporter buffers across
            connections = r.stats.connections
            metricsd.start()
            assert eventually(lambda: r.stats.connections > connections, timeout=60)

    stats = stream_through(metricsd, trial, kill_and_restart_three_times)
    assert stats.connections >= 4 and stats.resent > 0, stats


def test_transient_outage_buffers_and_delivers(metricsd, trial):
    metricsd.stop()
    r = reporter(metricsd, trial, max_age=0.05)
    for i in range(100):
        r.record({"step": float(i), "loss": 1.0}, time=BASE + i * 0.001)
    time.sleep(1.0)
    assert r.stats.acknowledged == 0 and r.stats.buffered == 200
    metricsd.start()
    r.flush(timeout=60)
    r.close()
    _assert_each_instant_once(metricsd, trial, 100)


def test_a_server_restored_from_a_backup_is_followed_from_its_position(
        metricsd, trial, caplog):
    r = reporter(metricsd, trial, stream_id="restored-stream")
    for i in range(3):
        r.record({"step": float(i)}, time=BASE + i)
        r.flush(timeout=30)  # a batch each
    # The database goes back to when it had batch 1 of the stream, as a
    # restore from a backup takes it, with the server restarted on it.
    metricsd.stop()
    metricsd.sql("DELETE FROM metrics WHERE trial_id = %d AND end_time > "
                 "(SELECT min(end_time) FROM metrics WHERE trial_id = %d)" % (trial, trial))
    metricsd.sql("UPDATE ingest_positions SET last_sequence = 1 WHERE trial_id = %d" % trial)
    metricsd.start()
    with caplog.at_level(logging.WARNING, logger="metrics_client"):
        r.record({"step": 3.0}, time=BASE + 3)
        r.flush(timeout=60)
    stats = r.close()
    assert stats.acknowledged == 4
    steps = sorted(v for a, t, g, name, v in metricsd.stored(trial) if name == "step")
    assert steps == [0.0, 3.0]  # 1 and 2 went with the restore
    assert "the server has batches up to 1 only, though it had acknowledged up to 3" \
        in caplog.text


def test_an_ended_trial_stops_the_reporter_for_good(metricsd, admin, trial):
    r = reporter(metricsd, trial)
    r.record({"loss": 1.0}, time=BASE)
    r.flush(timeout=30)
    admin.end_trial(trial)
    r.record({"loss": 2.0}, time=BASE + 1)
    with pytest.raises(PermanentError) as e:
        r.flush(timeout=30)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "COMPLETED" in e.value.message
    with pytest.raises(PermanentError):
        r.record({"loss": 3.0}, time=BASE + 2)
    stats = r.close()
    assert (stats.acknowledged, stats.rejected) == (1, 1)
    with pytest.raises(ReporterClosedError):
        r.record({"loss": 4.0})


def test_an_unknown_trial_is_permanent(metricsd):
    r = reporter(metricsd, 424242, token=metricsd.admin_token)
    r.record({"loss": 1.0}, time=BASE)
    with pytest.raises(PermanentError) as e:
        r.flush(timeout=30)
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    r.close()


def test_drop_oldest_keeps_the_newest_while_the_server_is_away(metricsd, trial):
    metricsd.stop()
    r = reporter(metricsd, trial, batch_size=10, buffer_samples=100, max_age=0.05)
    for i in range(300):
        r.record({"step": float(i)}, time=BASE + i * 0.001)  # never raises
    stats = r.stats
    assert stats.recorded == 300 and stats.buffered == 100 and stats.dropped == 200
    metricsd.start()
    r.flush(timeout=60)
    r.close()
    steps = sorted(v for a, t, g, name, v in metricsd.stored(trial))
    assert steps == [float(i) for i in range(200, 300)]


def test_block_waits_then_refuses_and_counts(metricsd, trial):
    metricsd.stop()
    r = reporter(metricsd, trial, batch_size=10, buffer_samples=20, overflow="block",
                 block_timeout=0.3)
    for i in range(20):
        r.record({"step": float(i)}, time=BASE + i)
    start = time.monotonic()
    with pytest.raises(BufferFullError, match="buffer full"):
        r.record({"step": 20.0, "loss": 1.0}, time=BASE + 20)
    assert 0.25 <= time.monotonic() - start < 5
    assert r.stats.dropped == 2 and r.stats.buffered == 20
    metricsd.start()
    r.flush(timeout=60)  # room comes with the acknowledgements
    r.record({"step": 21.0}, time=BASE + 21)
    r.flush(timeout=60)
    assert r.close().acknowledged == 21


def test_close_with_the_server_away_returns_in_time_and_says_what_was_left(
        metricsd, trial, caplog):
    metricsd.stop()
    r = reporter(metricsd, trial)
    for i in range(10):
        r.record({"step": float(i), "loss": 1.0}, time=BASE + i)
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="metrics_client"):
        stats = r.close(timeout=1.0)
    assert time.monotonic() - start < 3.0
    assert stats.unsent == 20 and stats.acknowledged == 0
    assert "20 values of trial %d could not be sent" % trial in caplog.text
    assert r.close() == stats


def test_a_forked_child_never_touches_the_parents_stream(metricsd, trial):
    r = reporter(metricsd, trial)
    r.record({"step": 0.0}, time=BASE)
    r.flush(timeout=30)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own records do nothing, with one warning
        os.close(read_end)
        status = 1
        try:
            handler = logging.Handler()
            lines = []
            handler.emit = lambda record: lines.append(record.getMessage())
            logging.getLogger("metrics_client").addHandler(handler)
            for i in range(5):
                r.record({"step": 100.0 + i}, time=BASE + 100 + i)
            r.flush(timeout=1)
            r.close(timeout=1)
            os.write(write_end, ("%d\n%s" % (len(lines), lines[0])).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as f:
        report = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    count, line = report.split("\n", 1)
    assert count == "1" and "forked child" in line
    # The parent's stream goes on untouched.
    r.record({"step": 1.0}, time=BASE + 1)
    r.flush(timeout=30)
    assert r.close().acknowledged == 2
    assert sorted(v for a, t, g, n, v in metricsd.stored(trial)) == [0.0, 1.0]


def test_tokens_and_their_secrecy(metricsd, admin, trial, caplog):
    other = admin.create_trial(trial + 5000).id
    foreign = metricsd.mint_token("reporter", other)
    with caplog.at_level(logging.DEBUG, logger="metrics_client"):
        for token, code in ((None, grpc.StatusCode.UNAUTHENTICATED),
                            ("mk_not-a-real-token-123", grpc.StatusCode.UNAUTHENTICATED),
                            (foreign, grpc.StatusCode.PERMISSION_DENIED)):
            r = Reporter(metricsd.address, trial, token=token, agent_id="host-a")
            r.record({"loss": 1.0}, time=BASE)
            with pytest.raises(PermanentError) as e:
                r.flush(timeout=30)
            assert e.value.code == code, e.value
            r.close()
            if token:
                assert token not in str(e.value) and token not in repr(r)
                assert token not in caplog.text
    with pytest.raises(ValueError, match="printable ASCII") as e:
        Reporter(metricsd.address, trial, token="secret with space")
    assert "secret" not in str(e.value)


def test_a_stream_handed_between_cpp_and_python_loses_and_doubles_nothing(
        metricsd, trial):
    import json
    import subprocess
    from conftest import CPP_REPORTER
    token = metricsd.mint_token("reporter", trial)
    stream = "handover-%d" % trial
    base_us = int(BASE * 1e6)

    def cpp(first, instants):
        out = subprocess.run(
            [CPP_REPORTER, "--server", metricsd.address, "--trial_id", str(trial),
             "--agent_id", "host-a", "--stream_id", stream, "--token", token,
             "--first", str(first), "--instants", str(instants), "--series", "2",
             "--base_us", str(base_us)] + (["--resume_stream"] if first else []),
            check=True, capture_output=True, text=True, timeout=60)
        return json.loads(out.stdout.strip().splitlines()[-1])

    def python(first, instants):
        with Reporter(metricsd.address, trial, agent_id="host-a", stream_id=stream,
                      resume=True, token=token, batch_size=7) as r:
            for i in range(first, first + instants):
                r.record({"s0": (float(i), "count"), "s1": (float(i), "count")},
                         time=(base_us + i * 1000) / 1e6)
            r.flush(timeout=30)
            return r.stats

    assert cpp(0, 30)["acknowledged"] == 60          # C++ starts the stream
    assert python(30, 40).acknowledged == 80         # Python continues it
    assert cpp(70, 30)["acknowledged"] == 60         # and C++ again
    # A Python reporter without resume refuses a stream the server is ahead on.
    with Reporter(metricsd.address, trial, agent_id="host-a", stream_id=stream,
                  token=token) as r:
        r.record({"s0": 1.0})
        with pytest.raises(PermanentError, match="another client uses the stream id"):
            r.flush(timeout=30)
    stored = metricsd.stored(trial)
    for name in ("s0", "s1"):
        assert sorted((t, v) for a, t, g, n, v in stored if n == name) == [
            (base_us + i * 1000, float(i)) for i in range(100)]


def test_threads_recording_at_once_each_keep_every_value(metricsd, trial):
    r = reporter(metricsd, trial, batch_size=300, max_age=0.05)

    def run(k):
        for i in range(500):
            r.record({"t%d" % k: float(i)}, time=BASE + i * 0.001)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r.flush(timeout=60)
    assert r.close().acknowledged == 2000
    stored = metricsd.stored(trial)
    for k in range(4):
        assert sorted(v for a, t, g, n, v in stored if n == "t%d" % k) == [
            float(i) for i in range(500)]

"""Exports through the Python client against a real metricsd: export() to
a file and to a DataFrame, every value bit for bit; the trace; a reader of
another trial refused; and trace.merge() on a trace file made as Kineto
(torch.profiler) writes one, our counters landing at the right ts."""
import json
import random
import struct

import grpc
import pytest

from metrics_client import Client, MetricsError, Reporter, trace

BASE = 1_790_000_000.0


def _bits(value):
    return struct.pack("<d", value)


def _record_random(metricsd, admin, trial, n=500):
    """n instants of a GPU series and an agent-wide one, random doubles of
    any exponent at microsecond times; the values sent, by (series, time)."""
    rng = random.Random(5)
    sent = {}
    with Reporter(metricsd.address, trial, token=admin.reporter_token(trial),
                  agent_id="host-x") as r:
        for i in range(n):
            t_us = int(BASE * 1e6) + i * 20000 + 7
            gpu = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(62)))[0]
            free = rng.uniform(-1e300, 1e300)
            r.record({"gpu_util": (gpu, "percent")}, time=t_us / 1e6, gpu="GPU-x")
            r.record({"memory_free": (free, "bytes")}, time=t_us / 1e6)
            sent[("gpu_util", t_us)] = gpu
            sent[("memory_free", t_us)] = free
        r.flush(timeout=30)
    return sent


def test_export_to_a_file_and_a_dataframe_keeps_every_value_bit_for_bit(
        metricsd, admin, trial, tmp_path):
    sent = _record_random(metricsd, admin, trial)
    path = tmp_path / "samples.csv"
    written = admin.export(trial, path=str(path))
    text = path.read_text()
    assert written == len(text.encode())
    lines = text.splitlines()
    assert lines[0] == "time,agent_id,gpu_index,gpu_uuid,name,unit,value"
    assert len(lines) == 1 + len(sent)
    assert lines[1:] == sorted(lines[1:], key=lambda l: l.split(",")[0])  # time order

    pandas = pytest.importorskip("pandas")
    frame = admin.export(trial, as_dataframe=True)
    assert list(frame.columns) == ["time", "agent_id", "gpu_index", "gpu_uuid", "name",
                                   "unit", "value"]
    assert len(frame) == len(sent)
    for row in frame.itertuples():
        t_us = (row.time - pandas.Timestamp(0, tz="UTC")) // pandas.Timedelta(microseconds=1)
        assert _bits(row.value) == _bits(sent[(row.name, t_us)]), row
    gpu = frame[frame.name == "gpu_util"]
    assert (gpu.gpu_index == 0).all() and (gpu.gpu_uuid == "GPU-x").all()
    assert frame[frame.name == "memory_free"].gpu_index.isna().all()
    assert (frame[frame.name == "memory_free"].gpu_uuid == "").all()
    # The DataFrame of query() has the same columns up to the value's.
    buckets = admin.query(trial, as_dataframe=True, max_points=5)
    assert list(buckets.columns[:6]) == list(frame.columns[:6])

    only = admin.export(trial, names="gpu_util", start=BASE, end=BASE + 1).decode()
    assert len(only.splitlines()) == 1 + 50  # a sample every 20 ms
    assert all(",GPU-x,gpu_util," in l for l in only.splitlines()[1:])


def test_a_reader_of_another_trial_is_refused(metricsd, admin, trial):
    other = admin.create_trial(trial + 1000).id
    with Client(metricsd.address, token=metricsd.mint_token("reporter", other)) as stranger:
        for call in (lambda: stranger.export(trial), lambda: stranger.trace(trial)):
            with pytest.raises(MetricsError) as e:
                call()
            assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
    with Client(metricsd.address, token=metricsd.mint_token("viewer")) as viewer:
        assert viewer.export(trial).startswith(b"time,agent_id")


def _kineto_trace(base_ns, start_us, length_us):
    """A trace file as torch.profiler (PyTorch 2.4+) writes one: ts in
    microseconds from baseTimeNanoseconds, the host process by its pid, GPU
    kernels under pid = the device index."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    for i in range(20):
        ts = start_us + i * length_us / 20
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242,
                       "tid": 4243, "ts": ts, "dur": 900.5})
        events.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn",
                       "pid": 0, "tid": 7, "ts": ts + 100, "dur": 700.25})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
            "traceEvents": events, "traceName": "host_4242.pt.trace.json",
            "displayTimeUnit": "ms", "baseTimeNanoseconds": base_ns}


def test_merge_lays_our_counters_on_a_kineto_trace_at_the_right_ts(
        metricsd, admin, trial, tmp_path):
    # Samples once a second over a minute; the torch trace covers 10 s of it.
    with Reporter(metricsd.address, trial, token=admin.reporter_token(trial),
                  agent_id="host-t") as r:
        for i in range(60):
            r.record({"gpu_util": (float(i), "percent")}, time=BASE + i, gpu="GPU-t")
        r.flush(timeout=30)
    base_ns = (int(BASE) + 20) * 10**9 + 123456  # Kineto's base: the profiler's start
    path = tmp_path / "host_4242.pt.trace.json"
    path.write_text(json.dumps(_kineto_trace(base_ns, 5_000_000.0, 10_000_000.0)))

    out = trace.merge(str(path), trial, admin)
    assert out == str(tmp_path / "host_4242.pt.trace.system.json")
    merged = json.loads(open(out).read())
    assert merged["baseTimeNanoseconds"] == base_ns
    assert merged["deviceProperties"][0]["name"] == "NVIDIA H100"  # kept as written
    torch_events = [e for e in merged["traceEvents"] if e.get("pid") in (0, 4242)]
    assert len(torch_events) == 42
    ours = [e for e in merged["traceEvents"] if e.get("pid", 0) >= 1_000_000_000]
    names = {e["args"]["name"] for e in ours if e["name"] == "process_name"}
    assert names == {"system metrics: host-t"}
    counters = [e for e in ours if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {"gpu_util (percent) GPU 0 GPU-t"}
    # The trace's events span BASE+25.000123 s .. BASE+34.5009 s; a second
    # more each side takes in the samples at 25..35 s, each its own event at
    # its exact ts (ns from the base, in microseconds).
    by_value = {e["args"]["value"]: e["ts"] for e in counters}
    assert sorted(by_value) == [float(i) for i in range(25, 36)]
    for value, ts in by_value.items():
        assert ts == ((int(BASE) + int(value)) * 10**9 - base_ns) / 1000
    # The sample of BASE+25 s lies 123.456 us before the first operator.
    assert by_value[25.0] == 5_000_000.0 - 123.456

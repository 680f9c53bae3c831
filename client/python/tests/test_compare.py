"""compare() against a real metricsd: two runs started apart laid on one
grid relative to their starts, every pooled bucket against the values sent,
a stalled GPU on one node found in its node's min, and a reporter refused
another trial."""
import grpc
import pytest

from metrics_client import Client, MetricsError, Reporter

BASE = 1_790_000_003.25  # not on a bucket boundary
SECONDS = 600


def _record(metricsd, admin, trial, start, nodes, stall=None):
    """1 Hz for SECONDS on each node, two GPUs each; the values sent."""
    sent = []
    for node in range(nodes):
        agent = "node-%d" % node
        with Reporter(metricsd.address, trial, token=admin.reporter_token(trial),
                      agent_id=agent) as r:
            for i in range(SECONDS):
                t = start + i + node * 0.001
                for gpu in range(2):
                    value = 60.0 + (i * 7 + gpu * 3 + node) % 30
                    if stall == (node, gpu, i):
                        value = 0.0
                    r.record({"gpu_util": (value, "percent")}, time=t, gpu="GPU-%d-%d" % (node, gpu))
                    sent.append((agent, gpu, int(round(t * 1e6)), value))
            r.flush(timeout=30)
    return sent


def test_runs_compared_relative_to_their_starts_and_nodes_side_by_side(metricsd, admin, trial):
    pandas = pytest.importorskip("pandas")
    later = admin.create_trial(trial + 500).id
    sent = {trial: _record(metricsd, admin, trial, BASE, 2, stall=(1, 0, 300)),
            later: _record(metricsd, admin, later, BASE + 3600.5, 1)}

    frame = admin.compare([trial, later], names=["gpu_util"], max_points=50)
    assert list(frame.columns) == ["trial_id", "time", "offset", "agent_id", "name", "unit",
                                   "gpu_count", "agent_count", "count", "min", "max", "mean"]
    assert set(frame.trial_id) == {trial, later}
    # One grid: the same offsets for both runs, evenly apart from 0: 599 s in
    # at most 50, so at least 12 s (below the finest rollup, from raw rows).
    offsets = {t: list(frame[frame.trial_id == t].offset) for t in (trial, later)}
    assert offsets[trial] == offsets[later]
    assert offsets[trial][0] == pandas.Timedelta(0)
    width = offsets[trial][1] - offsets[trial][0]
    assert pandas.Timedelta(seconds=11.98) <= width < pandas.Timedelta(seconds=13)
    assert all(o % width == pandas.Timedelta(0) for o in offsets[trial])
    for t in (trial, later):
        rows = frame[frame.trial_id == t]
        assert set(rows.gpu_count) == {2 if t == later else 4}
        for row in rows.itertuples():
            start_us = (row.time - pandas.Timestamp(0, tz="UTC")) // pandas.Timedelta(microseconds=1)
            width_us = width // pandas.Timedelta(microseconds=1)
            values = [v for (_, _, t_us, v) in sent[t] if start_us <= t_us < start_us + width_us]
            assert row.count == len(values), row
            assert row.min == min(values) and row.max == max(values), row
            assert row.mean == pytest.approx(sum(values) / len(values), rel=1e-12)
    assert frame[frame.trial_id == trial]["min"].min() == 0.0  # the stall shows
    assert frame[frame.trial_id == later]["min"].min() > 0.0

    nodes = admin.compare([trial], by="agent", relative=False, max_points=50)
    assert sorted(set(nodes.agent_id)) == ["node-0", "node-1"]
    assert nodes["offset"].isna().all()
    assert nodes[nodes.agent_id == "node-1"]["min"].min() == 0.0
    assert nodes[nodes.agent_id == "node-0"]["min"].min() > 0.0
    one_gpu = admin.compare([trial], by="agent", gpu_index=1)
    assert set(one_gpu.gpu_count) == {1}
    assert one_gpu["min"].min() > 0.0  # the stall was on GPU 0

    with pytest.raises(ValueError):
        admin.compare([trial], by="gpu")
    with pytest.raises(MetricsError) as e:
        admin.compare([trial, trial])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with Client(metricsd.address, token=metricsd.mint_token("reporter", later)) as reporter:
        assert set(reporter.compare([later]).trial_id) == {later}
        with pytest.raises(MetricsError) as e:
            reporter.compare([later, trial])
        assert e.value.code == grpc.StatusCode.PERMISSION_DENIED

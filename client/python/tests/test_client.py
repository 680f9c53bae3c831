"""Client against a real metricsd: trials, tokens, series and queries, and
errors that carry the server's code and message."""
import grpc
import pytest

from eventually import eventually
from metrics_client import Client, MetricsError, PermanentError, Reporter

BASE = 1_790_000_000.0


def test_trials_from_creation_to_end(admin):
    created = admin.create_trial(7001)
    assert (created.id, created.state) == (7001, "ACTIVE")
    assert admin.get_trial(7001).created_at == created.created_at
    assert 7001 in [t.id for t in admin.list_trials(state="ACTIVE")]
    ended = admin.end_trial(7001, "CANCELED")
    assert ended.state == "CANCELED" and ended.ended_at is not None
    assert 7001 not in [t.id for t in admin.list_trials(state="ACTIVE")]
    with pytest.raises(MetricsError) as e:
        admin.get_trial(7999)
    assert e.value.code == grpc.StatusCode.NOT_FOUND and "7999" in e.value.message
    with pytest.raises(MetricsError) as e:
        admin.create_trial(7001)
    assert e.value.code == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(ValueError, match="state"):
        admin.end_trial(7001, "DONE")


def test_a_reporter_token_minted_by_the_client_writes_its_trial_only(metricsd, admin, trial):
    secret = admin.reporter_token(trial, ttl=3600)
    with Reporter(metricsd.address, trial, token=secret) as r:
        r.record({"loss": 1.0}, time=BASE)
        r.flush(timeout=30)
    token = [t for t in admin.list_tokens() if t.role == "reporter" and t.trial_id == trial]
    assert len(token) == 1 and token[0].expires_at is not None
    with Client(metricsd.address, token=secret) as reporter_client:
        assert reporter_client.get_trial(trial).id == trial
        with pytest.raises(MetricsError) as e:
            reporter_client.create_trial(trial + 1)
        assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
    admin.revoke_token(token[0].id)
    # Revocation reaches the server's token cache within 5 s (docs/security.md).
    with Client(metricsd.address, token=secret) as revoked:
        def refused():
            try:
                revoked.get_trial(trial)
                return False
            except MetricsError as e:
                assert e.code == grpc.StatusCode.UNAUTHENTICATED
                return True
        assert eventually(refused, timeout=10, every=0.2)
    r = Reporter(metricsd.address, trial, token=secret)
    r.record({"loss": 2.0}, time=BASE + 1)
    with pytest.raises(PermanentError) as e:
        r.flush(timeout=30)
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert secret not in str(e.value)
    r.close()
    with Client(metricsd.address) as anonymous:
        with pytest.raises(MetricsError) as e:
            anonymous.list_trials()
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_query_buckets_keep_the_spike_and_fill_a_dataframe(metricsd, admin, trial):
    with Reporter(metricsd.address, trial, token=admin.reporter_token(trial),
                  agent_id="host-q") as r:
        for i in range(600):
            r.record({"gpu_util": (99.5 if i == 317 else 10.0, "percent")},
                     time=BASE + i, gpu="GPU-q")
            r.record({"memory_free": (float(i), "bytes")}, time=BASE + i)
        r.flush(timeout=30)
    data = admin.query(trial, names="gpu_util", start=BASE, end=BASE + 600, max_points=10)
    assert len(data) == 1
    gpu = data[0]
    assert (gpu.series.name, gpu.series.gpu_uuid, gpu.series.unit) == ("gpu_util", "GPU-q", "percent")
    assert len(gpu.buckets) <= 10 and sum(b.count for b in gpu.buckets) == 600
    assert max(b.max for b in gpu.buckets) == 99.5  # the one-sample spike
    assert min(b.min for b in gpu.buckets) == 10.0
    pandas = pytest.importorskip("pandas")
    frame = admin.query(trial, agent_id="host-q", start=BASE, end=BASE + 600,
                        max_points=10, as_dataframe=True)
    assert list(frame.columns) == ["time", "agent_id", "gpu_index", "gpu_uuid", "name", "unit",
                                   "count", "min", "max", "mean"]
    assert frame[frame.name == "gpu_util"]["gpu_index"].tolist() == [0] * len(gpu.buckets)
    assert frame[frame.name == "memory_free"]["gpu_index"].isna().all()
    assert frame.groupby("name")["count"].sum().to_dict() == {"gpu_util": 600,
                                                             "memory_free": 600}
    memory = frame[frame.name == "memory_free"]
    assert (memory["count"] * memory["mean"]).sum() == pytest.approx(sum(range(600)))
    assert str(frame["time"].dtype) == "datetime64[ns, UTC]"
    assert frame["time"].min() <= pandas.Timestamp(BASE, unit="s", tz="UTC")
    import datetime
    with pytest.raises(ValueError, match="start: a datetime must carry a time zone"):
        admin.query(trial, start=datetime.datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="end: must be seconds since the epoch"):
        admin.query(trial, end="tomorrow")
    with pytest.raises(MetricsError) as e:
        admin.query(trial, max_points=-1)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "max_points" in e.value.message

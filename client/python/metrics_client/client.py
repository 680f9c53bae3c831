"""Client: the service's calls other than streaming ingest, for a training
platform's harness and for analysts: trials (create, get, list, end), API
tokens (mint a reporter token for a trial), the series of a trial, chart
queries as plain lists or a pandas DataFrame, and exports: every raw
sample as CSV or a DataFrame, and a Chrome trace to lay beside a
torch.profiler trace (trace.merge).

Every failed call raises MetricsError with the server's code and message.
Thread-safety: thread-safe (one gRPC channel, shared).
"""
import dataclasses
import io
import json
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import json_format, timestamp_pb2

from . import _connection
from ._proto import (query_pb2, query_pb2_grpc, tokens_pb2, tokens_pb2_grpc,
                     trials_pb2, trials_pb2_grpc)
from ._times import to_micros
from .errors import from_rpc_error

_STATES = ("ACTIVE", "COMPLETED", "CANCELED", "ERROR")
_ROLES = ("admin", "viewer", "reporter")
TimeArg = Union[None, float, datetime]


def _datetime(ts: timestamp_pb2.Timestamp) -> Optional[datetime]:
    if not ts.seconds and not ts.nanos:
        return None
    return datetime.fromtimestamp(ts.seconds, timezone.utc) + timedelta(
        microseconds=ts.nanos // 1000)


def _timestamp(what: str, t: TimeArg) -> Optional[timestamp_pb2.Timestamp]:
    if t is None:
        return None
    micros = to_micros(what, t)
    return timestamp_pb2.Timestamp(seconds=micros // 1000000,
                                   nanos=(micros % 1000000) * 1000)


@dataclasses.dataclass(frozen=True)
class Trial:
    id: int
    state: str  # "ACTIVE", "COMPLETED", "CANCELED" or "ERROR"
    created_at: Optional[datetime]
    updated_at: Optional[datetime]
    ended_at: Optional[datetime]
    agents: List[Tuple[str, Optional[datetime], bool]]  # (agent, last sample, stale)
    # get_trial() only: agent -> the hardware it last sent, as AgentInventory's
    # fields ({"cpu_count": 64, "gpus": [{"name": ..., ...}], ...}).
    inventories: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Token:
    id: int
    name: str
    role: str  # "admin", "viewer" or "reporter"
    trial_id: int  # 0 unless a reporter token
    created_at: Optional[datetime]
    expires_at: Optional[datetime]
    revoked_at: Optional[datetime]


@dataclasses.dataclass(frozen=True)
class Series:
    agent_id: str
    gpu_uuid: str  # "" for an agent-wide series
    gpu_index: int
    name: str
    unit: str
    first_time: Optional[datetime]
    last_time: Optional[datetime]
    sample_count: int


@dataclasses.dataclass(frozen=True)
class Bucket:
    """One time bucket of a series: the values whose time falls in
    [start_us, start_us + resolution_us)."""
    start_us: int
    count: int
    min: float
    max: float
    mean: float


@dataclasses.dataclass(frozen=True)
class SeriesData:
    series: Series
    resolution_us: int
    buckets: List[Bucket]


def _trial(t: trials_pb2.Trial) -> Trial:
    return Trial(t.id, trials_pb2.Trial.State.Name(t.state), _datetime(t.created_at),
                 _datetime(t.updated_at), _datetime(t.ended_at),
                 [(a.agent_id, _datetime(a.last_sample_at), a.stale) for a in t.agents],
                 {a.agent_id: json_format.MessageToDict(a.inventory,
                                                        preserving_proto_field_name=True)
                  for a in t.agents if a.HasField("inventory")})


def _token(t: tokens_pb2.ApiToken) -> Token:
    return Token(t.id, t.name, tokens_pb2.ApiToken.Role.Name(t.role).lower(), t.trial_id,
                 _datetime(t.created_at), _datetime(t.expires_at), _datetime(t.revoked_at))


def _series(s: query_pb2.Series) -> Series:
    return Series(s.agent_id, s.gpu_uuid, s.gpu_index, s.name, s.unit,
                  _datetime(s.first_time), _datetime(s.last_time), s.sample_count)


class Client:
    """Calls of metricsd's gRPC API.

    Args:
        server: metricsd's gRPC address, "host:port".
        token, token_file: the API token (an admin token to create trials
            and tokens; a viewer token reads). Never logged.
        tls, tls_ca, tls_cert, tls_key: as for Reporter.
        timeout: seconds each call may take.
    """

    def __init__(self, server: str, token: Optional[str] = None,
                 token_file: Optional[str] = None, tls: bool = False,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, timeout: float = 30.0):
        self.server = server
        self._metadata = _connection.metadata(_connection.read_token(token, token_file))
        self._channel = _connection.open_channel(server, tls, tls_ca, tls_cert, tls_key)
        self._trials = trials_pb2_grpc.TrialServiceStub(self._channel)
        self._tokens = tokens_pb2_grpc.TokenServiceStub(self._channel)
        self._query = query_pb2_grpc.QueryServiceStub(self._channel)
        self._timeout = timeout

    def __repr__(self) -> str:
        return "Client(server=%r)" % (self.server,)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method, request):
        try:
            return method(request, metadata=self._metadata, timeout=self._timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    # ---- trials ------------------------------------------------------------

    def create_trial(self, trial_id: int = 0) -> Trial:
        """Creates a trial (with this id, or the next free one for 0)."""
        return _trial(self._call(self._trials.CreateTrial,
                                 trials_pb2.CreateTrialRequest(id=trial_id)))

    def get_trial(self, trial_id: int) -> Trial:
        return _trial(self._call(self._trials.GetTrial,
                                 trials_pb2.GetTrialRequest(trial_id=trial_id)))

    def list_trials(self, state: Optional[str] = None, limit: int = 0,
                    before_id: int = 0) -> List[Trial]:
        """Trials, newest first; `state` ("ACTIVE", ...) filters them."""
        request = trials_pb2.ListTrialsRequest(limit=limit, before_id=before_id)
        if state is not None:
            request.state = self._state(state)
        return [_trial(t) for t in self._call(self._trials.ListTrials, request).trials]

    def end_trial(self, trial_id: int, state: str = "COMPLETED") -> Trial:
        """Ends a trial: COMPLETED, CANCELED or ERROR. Its reporters then
        stop with PermanentError."""
        return _trial(self._call(self._trials.UpdateTrial, trials_pb2.UpdateTrialRequest(
            trial_id=trial_id, state=self._state(state))))

    @staticmethod
    def _state(state: str) -> int:
        if state not in _STATES:
            raise ValueError("state: must be one of %s, not %r" % (", ".join(_STATES), state))
        return trials_pb2.Trial.State.Value(state)

    # ---- tokens ------------------------------------------------------------

    def create_token(self, role: str, trial_id: int = 0, name: str = "",
                     ttl: Optional[float] = None) -> Tuple[Token, str]:
        """Creates an API token; returns it and its secret (shown once).
        role is "admin", "viewer" or "reporter" (with trial_id); ttl in
        seconds, default the server's."""
        if role not in _ROLES:
            raise ValueError("role: must be one of %s, not %r" % (", ".join(_ROLES), role))
        request = tokens_pb2.CreateTokenRequest(
            name=name, role=tokens_pb2.ApiToken.Role.Value(role.upper()),
            trial_id=trial_id, ttl_seconds=int(ttl or 0))
        response = self._call(self._tokens.CreateToken, request)
        return _token(response.token), response.secret

    def reporter_token(self, trial_id: int, ttl: Optional[float] = None) -> str:
        """The secret of a new reporter token for one trial, as the platform
        mints one when it starts the trial."""
        return self.create_token("reporter", trial_id=trial_id,
                                 name="reporter of trial %d" % trial_id, ttl=ttl)[1]

    def list_tokens(self) -> List[Token]:
        return [_token(t) for t in
                self._call(self._tokens.ListTokens, tokens_pb2.ListTokensRequest()).tokens]

    def revoke_token(self, token_id: int) -> Token:
        return _token(self._call(self._tokens.RevokeToken,
                                 tokens_pb2.RevokeTokenRequest(id=token_id)))

    # ---- series and queries ------------------------------------------------

    def list_series(self, trial_id: int) -> List[Series]:
        return [_series(s) for s in self._call(
            self._query.ListSeries, query_pb2.ListSeriesRequest(trial_id=trial_id)).series]

    @staticmethod
    def _select(request, names, agent_id, gpu_uuid, start, end) -> None:
        request.name.extend([names] if isinstance(names, str) else names or [])
        request.agent_id.extend([agent_id] if isinstance(agent_id, str) else agent_id or [])
        if gpu_uuid is not None:
            request.gpu_uuid.extend([gpu_uuid] if isinstance(gpu_uuid, str) else gpu_uuid)
        for field, value in (("start", start), ("end", end)):
            ts = _timestamp(field, value)
            if ts is not None:
                getattr(request, field).CopyFrom(ts)

    def _chunks(self, method, request):
        """The bytes of an export's stream, chunk by chunk (no deadline: an
        export of a long run takes as long as it takes)."""
        try:
            for chunk in method(request, metadata=self._metadata):
                yield chunk.data
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def query(self, trial_id: int, names: Optional[Iterable[str]] = None,
              agent_id: Union[None, str, Sequence[str]] = None,
              gpu_uuid: Union[None, str, Sequence[str]] = None,
              start: TimeArg = None, end: TimeArg = None,
              max_points: Optional[int] = None, as_dataframe: bool = False):
        """Time-bucketed values of a trial's series: each bucket's count,
        min, max and mean, exact (no spike is lost to downsampling).

        Args:
            names, agent_id, gpu_uuid: filters (a string or a list each).
            start, end: the window (seconds since the epoch or aware
                datetimes); default the whole trial.
            max_points: buckets per series at most; default the server's.
            as_dataframe: a pandas DataFrame, one row per series and
                bucket, with columns time (the bucket's start, UTC),
                agent_id, gpu_index, gpu_uuid, name, unit, count, min, max,
                mean: export()'s columns, a bucket's mean as its value.

        Returns a list of SeriesData, or the DataFrame.
        """
        request = query_pb2.QuerySeriesRequest(trial_id=trial_id)
        self._select(request, names, agent_id, gpu_uuid, start, end)
        if max_points is not None:
            request.max_points = max_points
        response = self._call(self._query.QuerySeries, request)
        data = [SeriesData(_series(s.series), s.resolution_us,
                           [Bucket(*b) for b in zip(s.bucket_start_us, s.count, s.min,
                                                    s.max, s.mean)])
                for s in response.series]
        return _dataframe(data) if as_dataframe else data

    def compare(self, trial_ids: Sequence[int], names: Optional[Iterable[str]] = None,
                by: str = "trial", relative: bool = True, gpu_index: Optional[int] = None,
                agent_id: Union[None, str, Sequence[str]] = None,
                start: TimeArg = None, end: TimeArg = None,
                offset_start: Optional[float] = None, offset_end: Optional[float] = None,
                max_points: Optional[int] = None):
        """Several runs (up to 8) side by side, or every node of one: each
        metric pooled across GPUs (and agents) into one series per trial
        (by="trial") or per agent (by="agent"), bucket by bucket on one
        grid: GET /api/v1/metrics/system/summary (docs/api.md). A bucket's
        min and max are those of every sample pooled, so one GPU's stall
        shows in the min.

        Args:
            trial_ids: the trials, each one the token may read.
            relative: time since each trial's first sample (the default,
                to compare runs); False for wall-clock time.
            offset_start, offset_end: the relative window in seconds from
                each start; start, end: the wall-clock one (as query()).
            gpu_index: only this GPU of each agent instead of all.
            names, agent_id, max_points: as for query().

        Returns a pandas DataFrame, one row per trial, agent, metric and
        bucket: trial_id, time (the bucket's start, UTC), offset (its time
        into the run, a Timedelta; NaT in wall-clock time), agent_id ("" for
        a trial's summary), name, unit, gpu_count (GPU series pooled; 0 for
        an agent-wide metric), agent_count, count, min, max, mean.
        """
        if by not in ("trial", "agent"):
            raise ValueError("by: must be 'trial' or 'agent', not %r" % (by,))
        request = query_pb2.SummarizeSeriesRequest(
            group=query_pb2.SummarizeSeriesRequest.AGENT if by == "agent"
            else query_pb2.SummarizeSeriesRequest.TRIAL,
            relative=bool(relative))
        request.trial_id.extend([trial_ids] if isinstance(trial_ids, int) else trial_ids)
        self._select(request, names, agent_id, None, start, end)
        for field, seconds in (("offset_start_ms", offset_start), ("offset_end_ms", offset_end)):
            if seconds is not None:
                setattr(request, field, int(round(float(seconds) * 1000)))
        if gpu_index is not None:
            request.gpu_index = gpu_index
        if max_points is not None:
            request.max_points = max_points
        response = self._call(self._query.SummarizeSeries, request)
        pandas = _pandas("compare()")
        rows = []
        for s in response.series:
            for start_us, count, lo, hi, mean in zip(s.bucket_start_us, s.count, s.min, s.max,
                                                     s.mean):
                rows.append((s.series.trial_id, start_us,
                             start_us - s.origin_us if relative else None,
                             s.series.agent_id, s.series.name, s.series.unit,
                             s.series.gpu_count, s.series.agent_count, count, lo, hi, mean))
        frame = pandas.DataFrame.from_records(rows, columns=(
            "trial_id", "time", "offset", "agent_id", "name", "unit", "gpu_count",
            "agent_count", "count", "min", "max", "mean"))
        frame["time"] = pandas.to_datetime(frame["time"], unit="us", utc=True)
        frame["offset"] = pandas.to_timedelta(frame["offset"], unit="us")
        return frame

    def export(self, trial_id: int, path=None, names: Optional[Iterable[str]] = None,
               agent_id: Union[None, str, Sequence[str]] = None,
               gpu_uuid: Union[None, str, Sequence[str]] = None,
               start: TimeArg = None, end: TimeArg = None, as_dataframe: bool = False):
        """Every raw sample of a trial's series in [start, end), in time
        order: the CSV of GET .../metrics/system/export.csv (docs/export.md),
        streamed, each value exactly as stored.

        Args:
            path: write the CSV there (a file name, or a binary file object)
                and return the number of bytes written; memory stays small
                for any run length.
            names, agent_id, gpu_uuid, start, end: as for query().
            as_dataframe: a pandas DataFrame with columns time (UTC),
                agent_id, gpu_index (empty for agent-wide series), gpu_uuid,
                name, unit, value (bit for bit as stored); where raw samples
                had expired, also bucket_seconds, min, max and count.

        With neither path nor as_dataframe, the CSV as bytes.
        """
        request = query_pb2.ExportSamplesRequest(trial_id=trial_id)
        self._select(request, names, agent_id, gpu_uuid, start, end)
        chunks = self._chunks(self._query.ExportSamples, request)
        if path is not None:
            return _write(path, chunks)
        data = b"".join(chunks)
        return _csv_dataframe(data) if as_dataframe else data

    def trace(self, trial_id: int, path=None, names: Optional[Iterable[str]] = None,
              agent_id: Union[None, str, Sequence[str]] = None,
              gpu_uuid: Union[None, str, Sequence[str]] = None,
              start: TimeArg = None, end: TimeArg = None, max_points: Optional[int] = None,
              base_time_ns: int = 0):
        """The chart data of a trial's series as a Chrome trace (Perfetto and
        chrome://tracing open it): GET .../metrics/system/trace.

        Args:
            path: write the trace there and return the bytes written;
                otherwise the trace as a dict.
            base_time_ns: the origin of the events' ts, in nanoseconds since
                the epoch: a torch.profiler trace's baseTimeNanoseconds, so
                both line up (trace.merge does this); 0 for the epoch.
            The others: as for query().
        """
        request = query_pb2.ExportTraceRequest(trial_id=trial_id,
                                               base_time_nanoseconds=int(base_time_ns))
        self._select(request, names, agent_id, gpu_uuid, start, end)
        if max_points is not None:
            request.max_points = max_points
        chunks = self._chunks(self._query.ExportTrace, request)
        if path is not None:
            return _write(path, chunks)
        return json.loads(b"".join(chunks))


def _write(path, chunks) -> int:
    written = 0
    if hasattr(path, "write"):
        for chunk in chunks:
            path.write(chunk)
            written += len(chunk)
        return written
    with open(path, "wb") as f:
        return _write(f, chunks)


def _pandas(what: str):
    try:
        import pandas
    except ImportError:
        raise ImportError("%s needs pandas (apt-get install python3-pandas)" % what) from None
    return pandas


_COLUMNS = ("time", "agent_id", "gpu_index", "gpu_uuid", "name", "unit")


def _dataframe(data: List[SeriesData]):
    pandas = _pandas("query(as_dataframe=True)")
    rows = [(b.start_us, d.series.agent_id,
             d.series.gpu_index if d.series.gpu_uuid else None, d.series.gpu_uuid,
             d.series.name, d.series.unit, b.count, b.min, b.max, b.mean)
            for d in data for b in d.buckets]
    frame = pandas.DataFrame.from_records(rows, columns=_COLUMNS + ("count", "min", "max",
                                                                    "mean"))
    frame["time"] = pandas.to_datetime(frame["time"], unit="us", utc=True)
    frame["gpu_index"] = frame["gpu_index"].astype("Int64")
    return frame


def _csv_dataframe(data: bytes):
    pandas = _pandas("export(as_dataframe=True)")
    frame = pandas.read_csv(
        io.BytesIO(data), dtype={"agent_id": str, "gpu_uuid": str, "name": str, "unit": str,
                                 "gpu_index": "Int64", "count": "Int64",
                                 "bucket_seconds": "Int64"},
        keep_default_na=False, na_values={"gpu_index": [""], "count": [""],
                                          "bucket_seconds": [""], "min": [""], "max": [""]},
        # The default parser may miss the last bit; the CSV's values are
        # written to read back exactly.
        float_precision="round_trip")
    frame["time"] = pandas.to_datetime(frame["time"], utc=True)
    return frame

"""Reporter: streams one host's metrics of one trial to metricsd, exactly
once, without ever slowing the training loop on the network.

record() only appends to a bounded in-memory buffer. A background thread
groups the values into batches (by size and age), sends them over
IngestService.StreamSystemMetrics with a stream id and sequence numbers, and
keeps each batch until the server acknowledges it. When the connection
breaks (a server restart, the network, an overloaded server) it reconnects
with exponential backoff and jitter and resends what was not acknowledged
under the same stream id and sequence numbers; the server skips what it
already has, so every value is stored once. Errors the server marks as
permanent (an unknown or ended trial, a token that may not write the trial)
stop the reporter; record() and flush() then raise them.

The protocol, the defaults and the counters are those of the C++ Reporter
(client/reporter.h), so either can continue the other's stream.

Thread-safety: thread-safe. Fork: a Reporter belongs to the process that
made it; in a forked child (a DataLoader worker) it goes inert, logs one
warning and drops what it is given, never touching the parent's connection.
"""
import atexit
import collections
import logging
import math
import os
import random
import socket
import threading
import time
import weakref
from datetime import datetime
from typing import (Any, Deque, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple,
                    Union)

import grpc
from google.protobuf import json_format

from . import _connection
from ._buffer import Instant, PendingSamples, label_problem
from ._proto import ingest_pb2, ingest_pb2_grpc
from ._signals import MAX_LABEL_LENGTH, MAX_UNIT_LENGTH
from ._times import to_micros
from .errors import (BufferFullError, FlushTimeoutError, MetricsError,
                     PermanentError, ReporterClosedError)

log = logging.getLogger("metrics_client")

# Stream endings that resending cannot fix (as the C++ reporter decides).
_PERMANENT = frozenset([
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED,
])
_JUST_FLOAT = {float}
_UNREACHABLE_AFTER = 2.0  # seconds before a log line says the server is away

Value = Union[float, int, Tuple[float, str]]


class ReporterStats(NamedTuple):
    """What happened to the values (samples) so far. Every recorded sample
    ends up acknowledged, rejected, dropped, buffered or (after close)
    unsent."""
    recorded: int      # accepted by record()
    sent: int          # put on the wire at least once
    acknowledged: int  # stored by the server
    rejected: int      # refused by the server (bad input); not retried
    dropped: int       # lost to the overflow policy
    resent: int        # sent again after a reconnect (counted per send)
    buffered: int      # held now: waiting, or sent and unacknowledged
    unsent: int        # given up at close()
    connections: int   # streams opened (1 + reconnects)


class _Batch:
    __slots__ = ("sequence", "samples", "sends", "request")

    def __init__(self, sequence, samples, request):
        self.sequence = sequence
        self.samples = samples
        self.sends = 1
        self.request = request


def _time_us(t) -> int:
    return time.time_ns() // 1000 if t is None else to_micros("time", t)


class Reporter:
    """Streams metrics of one trial from one host. See the module doc.

    Args:
        server: metricsd's gRPC address, "host:port".
        trial_id: the trial every value belongs to; it must exist.
        agent_id: the host the values describe; default the host name.
        stream_id: identifies this reporter's stream across reconnects.
            Default: agent, trial and a random part.
        resume: continue stream_id where the server's copy of it ends, when
            another reporter (Python or C++, or an earlier run) left it.
            Without it, a reporter that finds the server ahead of it stops
            with PermanentError, as another client seems to use the stream
            id. Never resume a stream whose reporter still runs: both would
            number batches alike and the server keeps one of each.
        token, token_file: the API token (a reporter token of the trial), or
            a file holding it. Never logged.
        tls, tls_ca, tls_cert, tls_key: as for metrics-agent.
        batch_size: a batch is sent when it holds this many values...
        max_age: ...or when its oldest value has waited this many seconds.
        buffer_samples: values held at once, waiting or unacknowledged.
        overflow: "drop_oldest" (default; record never waits: the oldest
            unsent values make room, counted as dropped) or "block" (record
            waits up to block_timeout for room, then raises BufferFullError).
        close_timeout: used by the context manager and at interpreter exit.
    """

    def __init__(self, server: str, trial_id: int, agent_id: Optional[str] = None,
                 stream_id: Optional[str] = None, resume: bool = False,
                 token: Optional[str] = None,
                 token_file: Optional[str] = None, tls: bool = False,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, batch_size: int = 2000,
                 max_age: float = 1.0, buffer_samples: int = 200000,
                 overflow: str = "drop_oldest", block_timeout: float = 1.0,
                 max_unacked_batches: int = 8, max_series: int = 10000,
                 initial_backoff: float = 0.2, max_backoff: float = 30.0,
                 close_timeout: float = 5.0):
        if isinstance(trial_id, bool) or not isinstance(trial_id, int) or trial_id <= 0:
            raise ValueError("trial_id: must be a positive trial id")
        agent_id = socket.gethostname() if agent_id is None else agent_id
        problem = label_problem(agent_id, MAX_LABEL_LENGTH, False)
        if problem:
            raise ValueError("agent_id: " + problem)
        if overflow not in ("drop_oldest", "block"):
            raise ValueError('overflow: must be "drop_oldest" or "block", not %r'
                             % (overflow,))
        for name, value, least in (("batch_size", batch_size, 1),
                                   ("max_unacked_batches", max_unacked_batches, 1),
                                   ("max_series", max_series, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError("%s: must be an integer of %d or more" % (name, least))
        if not isinstance(buffer_samples, int) or buffer_samples < batch_size:
            raise ValueError("buffer_samples: must hold at least batch_size values")
        if not max_age > 0 or not block_timeout >= 0 or not close_timeout >= 0:
            raise ValueError("max_age, block_timeout, close_timeout: must be "
                             "positive seconds")
        if not 0 < initial_backoff <= max_backoff:
            raise ValueError("initial_backoff, max_backoff: need "
                             "0 < initial_backoff <= max_backoff")
        if stream_id is None:
            stream_id = "%s/%d/%016x" % (agent_id[:64], trial_id,
                                         random.getrandbits(64))
        problem = label_problem(stream_id, MAX_LABEL_LENGTH, False)
        if problem:
            raise ValueError("stream_id: " + problem)
        self._token = _connection.read_token(token, token_file)
        self._channel = _connection.open_channel(server, tls, tls_ca, tls_cert, tls_key)
        self._stub = ingest_pb2_grpc.IngestServiceStub(self._channel)

        self.server = server
        self.trial_id = trial_id
        self.agent_id = agent_id
        self.stream_id = stream_id
        self._batch_size = batch_size
        self._max_age = max_age
        self._buffer_samples = buffer_samples
        self._block = overflow == "block"
        self._block_timeout = block_timeout
        self._max_unacked = max_unacked_batches
        self._max_series = max_series
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._close_timeout = close_timeout
        self._resume = resume
        self._pid = os.getpid()
        self._warned_fork = False

        self._cond = threading.Condition(threading.Lock())
        self._pending = PendingSamples()
        self._unacked: Deque[_Batch] = collections.deque()
        self._unacked_samples = 0
        self._next_sequence = 1
        self._write_index = 0  # _unacked[_write_index] is the next to write
        self._generation = 0   # of the current stream
        self._position_known = False
        self._rejections: Dict[int, MetricsError] = {}
        self._flushes = 0
        self._closed = False
        self._stop = False
        self._failure: Optional[PermanentError] = None
        self._last_error = "none"
        self._lost = False
        self._call = None
        self._close_stats: Optional[ReporterStats] = None
        self._inventory = None  # an AgentInventory for the next batch
        self._counts = dict(recorded=0, sent=0, acknowledged=0, rejected=0,
                            dropped=0, resent=0, unsent=0, connections=0)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="metrics_client.Reporter")
        self._thread.start()
        _live.add(self)

    def __repr__(self) -> str:
        return "Reporter(server=%r, trial_id=%d, agent_id=%r, stream_id=%r)" % (
            self.server, self.trial_id, self.agent_id, self.stream_id)

    def __enter__(self) -> "Reporter":
        return self

    def __exit__(self, *exc) -> None:
        self.close(self._close_timeout)

    # ---- the caller's side -------------------------------------------------

    def record(self, values: Mapping[str, Value], time: Union[None, float, datetime] = None,
               gpu: Optional[str] = None) -> None:
        """Buffers values measured at one instant; never waits on the network.

        Args:
            values: series name -> value, or -> (value, unit) to give the
                unit ("percent", "bytes", "bytes/s", ...; fixed for the life
                of a series, "" when never given).
            time: seconds since the epoch or an aware datetime; default now.
                Microseconds are kept.
            gpu: the GPU's UUID when the values are of one GPU.

        All or nothing: every value is buffered, or none is (ValueError or
        TypeError naming the series). Raises PermanentError once the server
        refused the stream for good, ReporterClosedError after close(), and
        BufferFullError under overflow="block" with no room in time.
        """
        if os.getpid() != self._pid:
            self._forked("record")
            return
        if not hasattr(values, "items"):
            raise TypeError("values: must be a dict of series name to value, not %s"
                            % type(values).__name__)
        time_us = _time_us(time)
        gpu_key = "" if gpu is None else gpu
        if gpu is not None:
            problem = label_problem(gpu, MAX_LABEL_LENGTH, False)
            if problem:
                raise ValueError("gpu: " + problem)
        known = self._pending.units.get(gpu_key)
        numbers = list(values.values())
        # The usual call: plain finite floats of series already known. Checked
        # with C-level set and sum operations (a non-finite value makes the
        # sum non-finite; an overflowing sum only takes the careful path).
        if (known is not None and set(map(type, numbers)) == _JUST_FLOAT
                and math.isfinite(sum(numbers)) and known.keys() >= values.keys()):
            names, new = list(values), None
        else:
            names, numbers, new = self._check_values(values, gpu_key, known or {})
        n = len(numbers)
        if n == 0:
            return
        if n > self._buffer_samples:
            raise ValueError("values: %d values do not fit a buffer of %d"
                             % (n, self._buffer_samples))
        with self._cond:
            if self._closed:
                raise ReporterClosedError()
            if self._failure is not None:
                raise self._failure
            if new:
                self._add_series(gpu_key, new)
            if self._held() + n > self._buffer_samples and not self._make_room(n):
                self._counts["dropped"] += n
                raise BufferFullError(
                    "buffer full: %d values are waiting or unacknowledged "
                    "(buffer_samples %d); the values were dropped. Last error: %s"
                    % (self._held(), self._buffer_samples, self._last_error))
            was_empty = self._pending.size == 0
            self._pending.push(Instant(time_us, gpu_key, names, numbers, _monotonic()))
            self._counts["recorded"] += n
            if was_empty or self._pending.size >= self._batch_size:
                self._cond.notify_all()

    @staticmethod
    def _check_values(values: Mapping[str, Value], gpu: str,
                      known: Dict[str, str]) -> Tuple[List[str], List[float], Dict[str, str]]:
        """Each value checked and converted: the names, the numbers, and the
        new series' units. Raises naming the first bad value."""
        names: List[str] = []
        numbers: List[float] = []
        new: Dict[str, str] = {}
        for name, value in values.items():
            unit = None
            if type(value) is tuple:
                if len(value) != 2:
                    raise ValueError("values[%r]: a tuple must be (value, unit)" % (name,))
                value, unit = value
            try:
                if isinstance(value, (bool, str, bytes)):
                    raise TypeError
                number = float(value)
            except (TypeError, ValueError):
                raise TypeError("values[%r]: %r is not a number" % (name, value)) from None
            if not math.isfinite(number):
                raise ValueError("values[%r]: %r is not a finite number" % (name, value))
            series_unit = known.get(name) if isinstance(name, str) else None
            if series_unit is None:
                problem = label_problem(name, MAX_LABEL_LENGTH, False)
                if problem:
                    raise ValueError("values: series name %r %s" % (name, problem))
                unit = "" if unit is None else unit
                problem = label_problem(unit, MAX_UNIT_LENGTH, True)
                if problem:
                    raise ValueError("values[%r]: unit %s" % (name, problem))
                new[name] = unit
            elif unit is not None and unit != series_unit:
                raise ValueError("values[%r]: unit %r differs from the series' "
                                 "unit %r" % (name, unit, series_unit))
            names.append(name)
            numbers.append(number)
        return names, numbers, new

    def _add_series(self, gpu: str, new: Dict[str, str]) -> None:
        """Under the lock: adds new series of one GPU (or none), within
        max_series."""
        units = self._pending.units.setdefault(gpu, {})
        for name in [name for name in new if name in units]:
            del new[name]  # another thread added it meanwhile
        if self._pending.series + len(new) > self._max_series:
            raise BufferFullError("series %r: more than max_series (%d) distinct series"
                                  % (next(iter(new)), self._max_series))
        units.update(new)
        self._pending.series += len(new)

    def _make_room(self, n: int) -> bool:
        """Under the lock: frees room for n values as the policy says; False
        when there is none (the caller drops the new values)."""
        if not self._block:
            excess = self._held() + n - self._buffer_samples
            self._counts["dropped"] += self._pending.drop_oldest(excess)
            return self._held() + n <= self._buffer_samples
        self._cond.wait_for(
            lambda: (self._held() + n <= self._buffer_samples or self._closed
                     or self._failure is not None),
            self._block_timeout)
        if self._closed:
            raise ReporterClosedError()
        if self._failure is not None:
            raise self._failure
        return self._held() + n <= self._buffer_samples

    def send_inventory(self, inventory: Mapping[str, Any]) -> None:
        """Sends what hardware the values come from with the next batch;
        the trial keeps the newest per agent (Client.get_trial() shows it).
        `inventory` has AgentInventory's fields (proto/metrics/v1/
        ingest.proto), for example {"host_name": "node-1", "cpu_count": 64,
        "gpus": [{"index": 0, "uuid": "GPU-...", "name": "NVIDIA H100"}]}.
        profile() sends one for you. ValueError for an unknown field."""
        message = ingest_pb2.AgentInventory()
        try:
            json_format.ParseDict(dict(inventory), message)
        except json_format.ParseError as e:
            raise ValueError("inventory: %s" % e) from None
        with self._cond:
            self._inventory = message

    def flush(self, timeout: Optional[float] = None) -> None:
        """Sends everything buffered now, without waiting for batches to
        fill, and waits until the server acknowledged it. Raises
        FlushTimeoutError (the values stay buffered) or PermanentError."""
        if os.getpid() != self._pid:
            self._forked("flush")
            return
        with self._cond:
            if self._closed and self._close_stats is not None:
                raise ReporterClosedError()
            self._flush_locked(timeout)

    def _flush_locked(self, timeout: Optional[float]) -> None:
        self._flushes += 1
        self._cond.notify_all()
        try:
            self._cond.wait_for(
                lambda: (self._held() == 0 or self._failure is not None or self._stop),
                timeout)
        finally:
            self._flushes -= 1
        if self._failure is not None:
            raise self._failure
        if self._held():
            raise FlushTimeoutError(
                "%d values not acknowledged in time (%d waiting, %d sent and "
                "unacknowledged); last error: %s" % (
                    self._held(), self._pending.size, self._unacked_samples,
                    self._last_error))

    def close(self, timeout: Optional[float] = None) -> ReporterStats:
        """Refuses further records, sends what is buffered for up to
        `timeout` seconds (default close_timeout), then stops. Returns the
        final stats; when values could not be sent, stats.unsent says how
        many and a warning says why. Never raises for undelivered values;
        later calls return the same stats at once."""
        if os.getpid() != self._pid:
            self._forked("close")
            return self.stats
        timeout = self._close_timeout if timeout is None else timeout
        deadline = _monotonic() + timeout
        with self._cond:
            if self._close_stats is not None:
                return self._close_stats
            self._closed = True
            problem = None
            try:
                self._flush_locked(timeout)
            except MetricsError as e:
                problem = e
            self._stop = True
            call = self._call
            self._cond.notify_all()
        if call is not None:
            call.cancel()
        self._thread.join(max(0.0, deadline - _monotonic()) + 1.0)
        with self._cond:
            unsent = self._held()
            self._counts["unsent"] = unsent
            self._pending.drop_oldest(self._pending.size)
            self._unacked.clear()
            self._unacked_samples = 0
            self._close_stats = self._stats_locked()
        self._channel.close()
        _live.discard(self)
        if unsent:
            log.warning("metrics_client: %d values of trial %d could not be sent "
                        "to %s: %s", unsent, self.trial_id, self.server,
                        problem.message if problem else self._last_error)
        return self._close_stats

    @property
    def stats(self) -> ReporterStats:
        """The counters now (see ReporterStats)."""
        with self._cond:
            return self._close_stats or self._stats_locked()

    def _stats_locked(self) -> ReporterStats:
        return ReporterStats(buffered=self._held(), **self._counts)

    def _forked(self, what: str) -> None:
        if not self._warned_fork:
            self._warned_fork = True
            log.warning(
                "metrics_client: Reporter %s used in a forked child (pid %d) "
                "of process %d: it stays with the parent, so %s does nothing "
                "here. Record in the parent, or make a new Reporter in the "
                "child.", self.stream_id, os.getpid(), self._pid, what)

    def _held(self) -> int:
        return self._pending.size + self._unacked_samples

    # ---- the background thread ---------------------------------------------

    def _fail(self, error: PermanentError) -> None:
        if self._failure is None:
            self._failure = error
            self._last_error = str(error)
            log.error("metrics_client: reporter %s stopped: %s", self.stream_id, error)
            self._cond.notify_all()

    def _batch_due(self) -> bool:
        size = self._pending.size
        return size >= self._batch_size or (size > 0 and (
            self._flushes > 0 or self._closed or
            _monotonic() >= self._pending.oldest_recorded() + self._max_age))

    def _must_end(self, generation: int) -> bool:
        return (self._stop or self._failure is not None
                or generation != self._generation)

    def _next_write(self, generation: int):
        """Under the lock: the next request of the stream, waiting until one
        is due; None when the stream must end."""
        while True:
            if self._must_end(generation):
                return None
            if self._write_index < len(self._unacked):
                batch = self._unacked[self._write_index]
                self._write_index += 1
                if batch.sends > 0:
                    self._counts["resent"] += batch.samples
                batch.sends += 1
                return batch.request
            window_open = len(self._unacked) < self._max_unacked
            if window_open and self._batch_due():
                request = ingest_pb2.StreamSystemMetricsRequest()
                batch = request.batch
                samples = self._pending.take_batch(self._batch_size, self.agent_id, batch)
                batch.sequence = self._next_sequence
                batch.trial_id = self.trial_id
                if self._inventory is not None:
                    batch.inventory.CopyFrom(self._inventory)
                    self._inventory = None
                self._next_sequence += 1
                self._unacked.append(_Batch(batch.sequence, samples, request))
                self._unacked_samples += samples
                self._write_index = len(self._unacked)
                self._counts["sent"] += samples
                return request
            timeout = None
            if window_open and self._pending.size:
                timeout = max(0.0, self._pending.oldest_recorded() + self._max_age
                              - _monotonic())
            self._cond.wait(timeout)

    def _requests(self, generation: int) -> Iterator:
        """The stream's requests: the open, then batches (run by gRPC's
        thread; waits for the server's position before the first batch)."""
        open_request = ingest_pb2.StreamSystemMetricsRequest()
        open_request.open.stream_id = self.stream_id
        open_request.open.trial_id = self.trial_id
        yield open_request
        with self._cond:
            self._cond.wait_for(lambda: self._position_known or self._must_end(generation))
        while True:
            with self._cond:
                request = self._next_write(generation)
            if request is None:
                return
            yield request

    def _acknowledge(self, sequence: int) -> None:
        while self._unacked and self._unacked[0].sequence <= sequence:
            batch = self._unacked.popleft()
            rejection = self._rejections.pop(batch.sequence, None)
            if rejection is not None:
                self._counts["rejected"] += batch.samples
                self._last_error = str(rejection)
                log.warning("metrics_client: the server refused batch %d (%d values): %s",
                            batch.sequence, batch.samples, rejection)
                # The trial ended or vanished: every later batch would be refused.
                if rejection.code in (grpc.StatusCode.FAILED_PRECONDITION,
                                      grpc.StatusCode.NOT_FOUND):
                    self._fail(PermanentError(rejection.code, rejection.message))
            else:
                self._counts["acknowledged"] += batch.samples
            self._unacked_samples -= batch.samples
            if self._write_index > 0:
                self._write_index -= 1
        self._cond.notify_all()

    def _on_position(self, acked: int) -> None:
        if acked >= self._next_sequence:
            if self._resume and self._next_sequence == 1:
                # Nothing sent yet: continue the stream where the server's
                # copy of it ends (another reporter's, deliberately resumed).
                log.info("metrics_client: continuing stream %s after batch %d",
                         self.stream_id, acked)
                self._next_sequence = acked + 1
            else:
                self._fail(PermanentError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "stream %s: the server has batches up to %d but this reporter "
                    "sent only %d; another client uses the stream id"
                    % (self.stream_id, acked, self._next_sequence - 1)))
        else:
            self._follow_a_restored_server(acked)
            self._acknowledge(acked)
        self._write_index = 0  # resend every unacknowledged batch, in order
        self._position_known = True
        if self._lost:
            log.info("metrics_client: connected to %s again; %d unacknowledged "
                     "batches to resend", self.server, len(self._unacked))
            self._lost = False
        self._cond.notify_all()

    def _follow_a_restored_server(self, server_has: int) -> None:
        """At a stream's opening: when the server has fewer batches than it
        acknowledged, its database was restored from a backup
        (docs/operating.md, "Backup and restore"). The batches after its
        position that this reporter no longer holds are lost; the ones it
        holds follow the position, renumbered, so the stream goes on without
        a gap."""
        first_held = self._unacked[0].sequence if self._unacked else self._next_sequence
        if server_has >= first_held - 1:
            return
        sequence = server_has
        for batch in self._unacked:
            sequence += 1
            batch.sequence = sequence
            batch.request.batch.sequence = sequence
        self._next_sequence = sequence + 1
        log.warning("metrics_client: stream %s: the server has batches up to %d "
                    "only, though it had acknowledged up to %d (was its database "
                    "restored from a backup?); %d acknowledged batches are lost; "
                    "going on from batch %d", self.stream_id, server_has,
                    first_held - 1, first_held - 1 - server_has, server_has + 1)

    def _on_response(self, response) -> None:
        with self._cond:
            if not self._position_known:
                self._on_position(response.acked_sequence)
                return
            for r in response.rejected:
                code = next((c for c in grpc.StatusCode if c.value[0] == r.code),
                            grpc.StatusCode.UNKNOWN)
                self._rejections[r.sequence] = MetricsError(code, r.message)
            self._acknowledge(response.acked_sequence)

    def _await_ready(self) -> bool:
        """Waits until the channel connects; False when stopping first."""
        start = _monotonic()
        while True:
            try:
                grpc.channel_ready_future(self._channel).result(timeout=0.25)
                return True
            except grpc.FutureTimeoutError:
                pass
            with self._cond:
                if self._stop:
                    return False
                if not self._lost and _monotonic() - start >= _UNREACHABLE_AFTER:
                    log.warning("metrics_client: cannot reach %s yet; buffering "
                                "and still trying", self.server)
                    self._lost = True

    def _run(self) -> None:
        backoff = self._initial_backoff
        while self._await_ready():
            with self._cond:
                if self._stop or self._failure is not None:
                    break
                self._generation += 1
                generation = self._generation
                self._position_known = False
                self._counts["connections"] += 1
                done_before = self._counts["acknowledged"] + self._counts["rejected"]
                call = self._stub.StreamSystemMetrics(
                    self._requests(generation),
                    metadata=_connection.metadata(self._token), wait_for_ready=True)
                self._call = call
            code, details, trailers = grpc.StatusCode.OK, "", ()
            try:
                for response in call:
                    self._on_response(response)
                code = call.code()
            except grpc.RpcError as e:
                code, details = e.code(), e.details() or ""
                trailers = e.trailing_metadata() or ()
            except Exception as e:  # a bug of ours must not kill the thread silently
                code, details = grpc.StatusCode.INTERNAL, "reporter error: %r" % (e,)
            with self._cond:
                self._call = None
                self._generation += 1  # ends this stream's request iterator
                self._cond.notify_all()
                if self._stop or self._failure is not None:
                    break
                if self._counts["acknowledged"] + self._counts["rejected"] > done_before:
                    backoff = self._initial_backoff
                self._last_error = "%s: %s" % (code.name, details)
                if code in _PERMANENT:
                    self._fail(PermanentError(code, details))
                    break
                delay = backoff * random.uniform(0.8, 1.2)
                backoff = min(self._max_backoff, backoff * 2)
                for key, value in trailers:
                    if key == "retry-after-ms" and str(value).isdigit():
                        delay = max(delay, int(value) / 1000.0)
                if not self._lost:
                    log.warning("metrics_client: stream to %s ended (%s); "
                                "reconnecting with backoff, first in %.1f s",
                                self.server, self._last_error, delay)
                    self._lost = True
                self._cond.wait_for(lambda: self._stop, delay)


def _monotonic() -> float:
    return time.monotonic()


# Reporters not yet closed, closed at interpreter exit (each within its
# close_timeout) so that a script's last values are sent.
_live: "weakref.WeakSet[Reporter]" = weakref.WeakSet()


@atexit.register
def _close_live_reporters() -> None:
    for reporter in list(_live):
        if reporter._pid == os.getpid():
            reporter.close()

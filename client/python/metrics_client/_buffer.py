"""The Reporter's samples not yet put into a batch: the series seen so far,
each with its fixed unit, and a FIFO of recorded instants. take_batch turns
the oldest instants into a SystemMetricsBatch that declares only the series
it uses, one report per instant, as the C++ reporter does.

Thread-compatible: the Reporter guards it with its lock.
"""
import collections
from typing import Deque, Dict, List, Optional, Tuple

from ._proto import ingest_pb2


# (name, gpu_uuid); gpu_uuid is "" for an agent-wide series.
SeriesKey = Tuple[str, str]


def label_problem(value, max_length: int, allow_empty: bool) -> Optional[str]:
    """Why `value` is not a valid label, or None: the vocabulary's rule in
    the server's words (common/vocabulary/label.h): printable ASCII, at most
    max_length characters, no space at either end. client/testdata/labels.json
    holds the cases the server and both clients are tested on."""
    if not isinstance(value, str):
        return "must be a string, not %s" % type(value).__name__
    if not value:
        return None if allow_empty else "must not be empty"
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) > max_length:
        return "is %d characters long; the limit is %d" % (len(raw), max_length)
    if not (value.isascii() and value.isprintable()):
        offset, byte = next((i, b) for i, b in enumerate(raw) if b < 0x20 or b > 0x7e)
        return ("has a non-printable character (byte %d) at offset %d; only printable "
                "ASCII is allowed" % (byte, offset))
    if value[0] == " " or value[-1] == " ":
        return "must not start or end with a space"
    return None


class Instant:
    """The values of one record() call: one report."""
    __slots__ = ("time_us", "gpu", "names", "values", "recorded_at")

    def __init__(self, time_us: int, gpu: str, names: List[str],
                 values: List[float], recorded_at: float):
        self.time_us = time_us
        self.gpu = gpu  # "" for agent-wide values
        self.names = names
        self.values = values
        self.recorded_at = recorded_at  # time.monotonic(), for batch age


class PendingSamples:
    def __init__(self) -> None:
        # GPU UUID ("" for none) -> series name -> unit.
        self.units: Dict[str, Dict[str, str]] = {}
        self.series = 0  # distinct series in units
        self._instants: Deque[Instant] = collections.deque()
        self.size = 0  # samples (values) held

    def push(self, instant: Instant) -> None:
        self._instants.append(instant)
        self.size += len(instant.values)

    def oldest_recorded(self) -> Optional[float]:
        return self._instants[0].recorded_at if self._instants else None

    def drop_oldest(self, samples: int) -> int:
        """Drops whole instants, oldest first, until at least `samples`
        values are gone or none is left; returns how many values went."""
        dropped = 0
        while dropped < samples and self._instants:
            dropped += len(self._instants.popleft().values)
        self.size -= dropped
        return dropped

    def take_batch(self, max_samples: int, agent_id: str,
                   batch: ingest_pb2.SystemMetricsBatch) -> int:
        """Moves the oldest instants, up to max_samples values (at least one
        instant), into `batch`; returns the number of values."""
        numbers: Dict[SeriesKey, int] = {}
        batch.agent_id = agent_id
        taken = 0
        while self._instants and (taken == 0 or
                                  taken + len(self._instants[0].values) <= max_samples):
            instant = self._instants.popleft()
            report = batch.reports.add()
            report.time.seconds, micros = divmod(instant.time_us, 1000000)
            report.time.nanos = micros * 1000
            indexes = []
            gpu, units = instant.gpu, self.units[instant.gpu]
            for name in instant.names:
                key = (name, gpu)
                number = numbers.get(key)
                if number is None:
                    number = numbers[key] = len(numbers)
                    batch.series.add(name=name, gpu_uuid=gpu, unit=units[name])
                indexes.append(number)
            report.series.extend(indexes)
            report.values.extend(instant.values)
            taken += len(instant.values)
        self.size -= taken
        return taken

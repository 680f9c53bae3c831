"""metrics_client: Python client of the profiling metrics service.

- Reporter: streams a trial's metrics from one host to metricsd, exactly
  once across reconnects and server restarts; record() never waits on the
  network.
- profile(): the in-process system profiler (CPU, memory, disks, network,
  NVIDIA GPUs) reporting through a Reporter every second.
- Client: trials, API tokens, series, chart queries (lists of buckets, or a
  pandas DataFrame), and exports (raw samples as CSV or a DataFrame; a
  Chrome trace).
- trace.merge(): a torch.profiler trace with the trial's system metrics
  added, one file for Perfetto.
- errors: MetricsError (with the server's code and message) and its kinds.

Example:
    from metrics_client import Reporter
    with Reporter("localhost:8081", trial_id=7, token_file="token") as r:
        for step in range(100):
            r.record({"loss": 0.5 / (step + 1), "throughput": (1200.0, "samples/s")})

Thread-safety: Reporter and Client are thread-safe; see each class.
"""
__version__ = "1.0.0"

from .client import Bucket, Client, Series, SeriesData, Token, Trial
from .errors import (BufferFullError, FlushTimeoutError, MetricsError, PermanentError,
                     ReporterClosedError)
from . import trace
from .profiler import Profiler, profile
from .reporter import Reporter, ReporterStats

__all__ = [
    "Bucket", "BufferFullError", "Client", "FlushTimeoutError", "MetricsError",
    "PermanentError", "Profiler", "Reporter", "ReporterClosedError", "ReporterStats",
    "Series", "SeriesData", "Token", "Trial", "profile", "trace",
]

"""trace.merge: one file with a torch.profiler trace and the trial's system
metrics over the same minutes, which Perfetto (ui.perfetto.dev) and
chrome://tracing open as one timeline: GPU utilisation, memory and the rest
as counter tracks beside the profiler's operators and kernels.

The torch trace's own clock decides the alignment: its baseTimeNanoseconds
(PyTorch 2.4 and later write ts relative to it; older versions and Composer
write absolute epoch microseconds, base 0) is passed to the server, which
writes our ts from the same origin. Hosts' clocks differ by their NTP
offset (usually well under a millisecond; docs/export.md).

Thread-safety: merge is a plain function; the client it is given is
thread-safe.
"""
import gzip
import json
import math
from typing import Iterable, Optional, Sequence, Union


def _load(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def window(trace) -> tuple:
    """(base_time_ns, first_us, last_us) of a torch trace's events: its base,
    and the earliest start and latest end of its timed events, in
    microseconds since the epoch. ValueError for a trace with no timed
    event."""
    events = trace if isinstance(trace, list) else trace.get("traceEvents", [])
    base_ns = 0 if isinstance(trace, list) else int(trace.get("baseTimeNanoseconds", 0) or 0)
    first = last = None
    for e in events:
        if not isinstance(e, dict) or e.get("ph") == "M":
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            continue
        end = ts + (e.get("dur") or 0)
        first = ts if first is None else min(first, ts)
        last = end if last is None else max(last, end)
    if first is None:
        raise ValueError("the torch trace has no timed events")
    return base_ns, base_ns / 1000.0 + first, base_ns / 1000.0 + last


def merge(torch_trace_path: str, trial_id: int, client, output_path: Optional[str] = None,
          names: Optional[Iterable[str]] = None,
          agent_id: Union[None, str, Sequence[str]] = None,
          gpu_uuid: Union[None, str, Sequence[str]] = None,
          margin: float = 1.0, max_points: Optional[int] = None) -> str:
    """Writes the torch trace at `torch_trace_path` (JSON, or .json.gz) with
    the trial's system metrics added, over the trace's window widened by
    `margin` seconds each side (so the sample just before its start is in),
    and returns the file's path.

    Args:
        client: a metrics_client.Client whose token may read the trial.
        output_path: default: the input's name with ".system.json" for its
            extension.
        names, agent_id, gpu_uuid, max_points: as for Client.query(); with
            few enough samples in the window each is its own event.
    """
    torch = _load(torch_trace_path)
    base_ns, first_us, last_us = window(torch)
    ours = client.trace(trial_id, names=names, agent_id=agent_id, gpu_uuid=gpu_uuid,
                        start=math.floor(first_us) / 1e6 - margin,
                        end=math.ceil(last_us + 1) / 1e6 + margin,
                        max_points=max_points, base_time_ns=base_ns)
    if isinstance(torch, list):  # the bare array form of the format
        merged = {"traceEvents": torch + ours["traceEvents"]}
    else:
        merged = dict(torch)
        merged["traceEvents"] = list(torch.get("traceEvents", [])) + ours["traceEvents"]
    if output_path is None:
        stem = torch_trace_path
        for ext in (".gz", ".json"):
            if stem.endswith(ext):
                stem = stem[: -len(ext)]
        output_path = stem + ".system.json"
    with open(output_path, "w", encoding="utf-8") as f:
        json.dump(merged, f)
    return output_path

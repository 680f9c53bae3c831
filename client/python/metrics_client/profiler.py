"""The in-process system profiler: a sampler thread that reads the host's
system metrics every `interval` seconds (psutil for CPU, memory, disks and
network; NVML through ctypes for GPUs) with the names and units of
metrics-agent, and reports every sample, exactly once, through a Reporter.

    with metrics_client.profile(server="metrics:8081", trial_id=7,
                                token_file="/run/secrets/metrics-token"):
        train()

Only one process per host should sample: the metrics are the host's, so
two samplers would report each value twice under the same agent. With one
process per GPU (torchrun, DeepSpeed), profile in local rank 0 only:
enabled=os.environ.get("LOCAL_RANK", "0") == "0".

Thread-safety: start() and stop() from one thread; the sampler runs on its
own thread.
"""
import logging
import os
import threading
import time
from typing import Any, Optional

import psutil

from . import __version__
from ._host import HostSampler, host_inventory
from ._job import JobSampler
from ._nvml import Nvml, NvmlError, inventory_text
from .reporter import Reporter, ReporterStats

log = logging.getLogger("metrics_client")


class Profiler:
    """Samples the host and reports through `reporter` every `interval`
    seconds while started. Made by profile(); see there."""

    def __init__(self, reporter: Optional[Reporter], interval: float = 1.0,
                 nvml_library: Optional[str] = "libnvidia-ml.so.1",
                 procfs_path: str = "/proc", owns_reporter: bool = False,
                 job: bool = True, job_pid: Optional[int] = None,
                 cgroup: Optional[str] = "self", cgroup_root: str = "/sys/fs/cgroup"):
        if not interval > 0:
            raise ValueError("interval: must be positive seconds")
        self.reporter = reporter
        self.interval = interval
        self._nvml_library = nvml_library
        self._procfs_path = procfs_path
        self._owns_reporter = owns_reporter
        self._job = (job_pid or os.getpid(), cgroup, cgroup_root) if job else None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._nvml: Optional[Nvml] = None
        self.samples = 0  # samples taken
        self.gpus = 0     # GPUs found

    def __enter__(self) -> "Profiler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Profiler":
        """Starts sampling (a no-op when disabled or already started)."""
        if self.reporter is None or self._thread is not None:
            return self
        self._stop.clear()
        inventory = host_inventory(self._procfs_path,
                                   "metrics_client %s (Python)" % __version__)
        if self._nvml_library:
            try:
                self._nvml = Nvml(self._nvml_library)
                self.gpus = len(self._nvml.uuids)
                inventory.update(self._nvml.describe())
            except NvmlError as e:
                log.info("metrics_client: no GPU metrics: %s", e)
                # The page shows this sentence where the GPU charts would be.
                inventory["gpu_status"] = inventory_text("NVML not available: %s" % e)
        else:
            inventory["gpu_status"] = "NVML not available: GPU metrics turned off"
        self.reporter.send_inventory(inventory)
        sampler = HostSampler(self._procfs_path)
        job = None
        if self._job is not None:
            pid, cgroup, cgroup_root = self._job
            try:
                job = JobSampler(pid, cgroup, cgroup_root, self._procfs_path)
            except (OSError, psutil.Error) as e:
                # Without its cgroup (none mounted here) the processes still count.
                log.info("metrics_client: the job's cgroup is not reported: %s", e)
                try:
                    job = JobSampler(pid, None, cgroup_root, self._procfs_path)
                except psutil.Error as e:
                    log.warning("metrics_client: the job's share is not reported: %s", e)
        self._thread = threading.Thread(target=self._run, args=(sampler, job), daemon=True,
                                        name="metrics_client.Profiler")
        self._thread.start()
        return self

    def stop(self, timeout: Optional[float] = None) -> Optional[ReporterStats]:
        """Stops sampling; closes the reporter profile() made (within
        `timeout`, default its close_timeout) and returns its stats."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            if self._nvml is not None:
                self._nvml.close()
                self._nvml = None
        if self.reporter is not None and self._owns_reporter:
            return self.reporter.close(timeout)
        return None

    def _run(self, sampler: HostSampler, job: Optional[JobSampler]) -> None:
        previous = [time.monotonic()]
        failing = set()  # sources that failed last time, logged once

        def sample():
            now = time.monotonic()
            stamp = time.time()
            measurements, errors = sampler.take(now - previous[0])
            if job is not None:
                job_measurements, job_errors, job_gpus = job.take(now - previous[0], self._nvml)
                measurements += job_measurements
                errors += job_errors
                for uuid, values in job_gpus:
                    self._record(values, stamp, uuid)
            previous[0] = now
            if self._nvml is not None:
                try:
                    for uuid, values in self._nvml.read():
                        self._record(values, stamp, uuid)
                except NvmlError as e:
                    errors.append("nvml: %s" % e)
                for note in self._nvml.take_notes():
                    log.info("metrics_client: %s", note)
            self._record({name: (value, unit) for name, value, unit in measurements},
                         stamp, None)
            self.samples += 1
            for line in errors:
                if line.split(":", 1)[0] not in failing:
                    log.warning("metrics_client: sampling %s", line)
            failing.clear()
            failing.update(line.split(":", 1)[0] for line in errors)

        next_at = previous[0] + self.interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            # A fixed schedule: a slow sample does not shift the next ones.
            next_at += self.interval
            if next_at < time.monotonic():
                next_at = time.monotonic() + self.interval
            sample()
        # The end of the run is sampled too, so even a short one has a sample.
        sample()

    def _record(self, values: dict, stamp: float, gpu: Optional[str]) -> bool:
        try:
            self.reporter.record(values, time=stamp, gpu=gpu)
            return True
        except Exception as e:  # the reporter stopped or is full: keep sampling
            log.debug("metrics_client: profiler record: %s", e)
            return False


def profile(trial_id: Optional[int] = None, server: Optional[str] = None,
            interval: float = 1.0, reporter: Optional[Reporter] = None,
            enabled: bool = True, nvml_library: Optional[str] = "libnvidia-ml.so.1",
            procfs_path: str = "/proc", job: bool = True, job_pid: Optional[int] = None,
            cgroup: Optional[str] = "self", cgroup_root: str = "/sys/fs/cgroup",
            **reporter_options: Any) -> Profiler:
    """The system profiler of this host, as a context manager or with
    start()/stop().

    Args:
        trial_id, server: the trial and metricsd's gRPC address ("host:port";
            default $METRICS_SERVER, else "localhost:8081") for the Reporter
            it makes; `reporter_options` go to that Reporter (token_file,
            agent_id, tls_ca, ...).
        interval: seconds between samples (1.0: every second, each kept).
        reporter: report through this Reporter instead (not closed by stop).
        enabled: False makes a profiler that does nothing, for every process
            but one per host (see the module doc).
        nvml_library: the NVML library to load; None for no GPU metrics.
        procfs_path: where proc(5) is mounted (tests use recorded files).
        job: also report the job's own share, as metrics-agent's --pid and
            --cgroup do: this process and its descendants (or `job_pid`'s),
            their CPU, resident memory and GPU memory per GPU, and the
            cgroup `cgroup` ("self": this process's; None: none; where
            cgroupfs is mounted: `cgroup_root`) read as the kernel limits it.
    """
    if not enabled:
        return Profiler(None, interval)
    owns = reporter is None
    if owns:
        if trial_id is None:
            raise ValueError("trial_id: give the trial to report for (or a reporter)")
        server = server or os.environ.get("METRICS_SERVER", "localhost:8081")
        reporter = Reporter(server, trial_id, **reporter_options)
    elif reporter_options or trial_id is not None:
        raise ValueError("trial_id and reporter options go to the Reporter, "
                         "not beside one")
    return Profiler(reporter, interval, nvml_library, procfs_path, owns_reporter=owns,
                    job=job, job_pid=job_pid, cgroup=cgroup, cgroup_root=cgroup_root)

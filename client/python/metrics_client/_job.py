"""The job's own share of the host, with the names, units and rules of
metrics-agent's --pid and --cgroup (client/job_sampler.h): the processes'
CPU (process_cpu_util, 100 = one CPU), resident memory (process_memory_rss)
and GPU memory per GPU (process_gpu_memory), and the cgroup's CPU use as a
share of the CPUs it may use (cgroup_cpu_util: its quota, else its cpuset,
else every CPU), its memory use and limit (cgroup_memory_used, _limit), for
cgroup v2 and v1.

Thread-compatible: one sampler thread takes samples.
"""
import os
import time
from typing import Dict, List, Optional, Tuple

import psutil

from ._signals import UNITS, measurement

Measurement = Tuple[str, float, str]  # (name, value, unit)

# The process tree is walked (every process of the host) at most this often;
# between walks only its known processes are read, as metrics-agent does.
TREE_WALK_EVERY = 10.0
# v1's "unlimited" is a number near 2^63; anything from 2^60 is no limit.
_NO_LIMIT_FROM = 1 << 60
_MAX_CPUS = 8192


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _number(text: Optional[str]) -> Optional[int]:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def parse_cpu_max(text: str) -> Optional[float]:
    """cgroup v2 cpu.max ("max 100000", "800000 100000"): the CPUs its
    quota allows; None for no quota. ValueError for other text."""
    quota, period = text.split()
    if int(period) <= 0:
        raise ValueError("cpu.max: period must be positive")
    return None if quota == "max" else int(quota) / int(period)


def count_cpu_list(text: str) -> int:
    """How many CPUs a list ("0-7,16-23") names. ValueError for other text."""
    count = 0
    for part in filter(None, text.strip().split(",")):
        low, _, high = part.partition("-")
        low, high = int(low), int(high or low)
        if not 0 <= low <= high < _MAX_CPUS:
            raise ValueError("cpu list: %r" % part)
        count += high - low + 1
    return count


def memory_limit(text: Optional[str]) -> Optional[int]:
    if text is None or text.strip() == "max":
        return None
    value = _number(text)
    return value if value is not None and value < _NO_LIMIT_FROM else None


def find_cgroup(root: str, path: str, procfs_path: str) -> Dict[str, object]:
    """Where the cgroup `path` (or "self") has its files: version, cpu
    (CPU time), quota and memory directories. OSError when it is not there."""
    version = 2 if os.path.exists(os.path.join(root, "cgroup.controllers")) else 1
    paths = {"v2": path, "cpuacct": path, "cpu": path, "memory": path}
    if path == "self":
        own = _read(os.path.join(procfs_path, "self", "cgroup")) or ""
        for line in own.splitlines():
            fields = line.split(":", 2)
            if len(fields) != 3:
                continue
            if fields[0] == "0" and not fields[1]:
                paths["v2"] = fields[2]
            for controller in fields[1].split(","):
                if controller in paths:
                    paths[controller] = fields[2]
    if version == 2:
        where = root + paths["v2"]
        dirs = {"cpu": where, "quota": where, "memory": where}
    else:
        both = os.path.isdir(os.path.join(root, "cpu,cpuacct"))
        dirs = {"cpu": root + ("/cpu,cpuacct" if both else "/cpuacct") + paths["cpuacct"],
                "quota": root + ("/cpu,cpuacct" if both else "/cpu") + paths["cpu"],
                "memory": root + "/memory" + paths["memory"]}
    for directory in dirs.values():
        if not os.path.isdir(directory):
            raise OSError("cgroup %s: %s is not a directory (cgroup v%d under %s)"
                          % (path, directory, version, root))
    return dict(dirs, version=version)


class JobSampler:
    """The share of the process `pid` and its descendants, and of the
    cgroup `cgroup` (a path, "self", or None). OSError when the cgroup is
    not there; psutil.NoSuchProcess when the process is not."""

    def __init__(self, pid: int, cgroup: Optional[str], cgroup_root: str = "/sys/fs/cgroup",
                 procfs_path: str = "/proc"):
        self._root = psutil.Process(pid)
        self._tree: List[psutil.Process] = []
        self._walked_at = -TREE_WALK_EVERY
        self._cgroup = find_cgroup(cgroup_root, cgroup, procfs_path) if cgroup else None
        stat = _read(os.path.join(procfs_path, "stat")) or ""
        self._host_cpus = max(1, sum(1 for line in stat.splitlines()
                                     if line.startswith("cpu") and line[3:4].isdigit()))
        self._previous = self._cpu_times()
        self._previous_usage = self._cgroup_usage() if self._cgroup else None

    def _processes(self) -> List[psutil.Process]:
        now = time.monotonic()
        if now - self._walked_at >= TREE_WALK_EVERY:
            self._walked_at = now
            try:
                self._tree = [self._root] + self._root.children(recursive=True)
            except psutil.Error:
                self._tree = []
        return [p for p in self._tree if p.is_running()]

    def _cpu_times(self) -> Dict[int, float]:
        times = {}
        for p in self._processes():
            try:
                t = p.cpu_times()
                times[p.pid] = t.user + t.system
            except psutil.Error:
                pass  # it exited meanwhile
        return times

    def _cgroup_usage(self) -> Optional[float]:
        """CPU seconds the cgroup used since it was made."""
        if self._cgroup["version"] == 2:
            for line in (_read(os.path.join(self._cgroup["cpu"], "cpu.stat")) or "").splitlines():
                if line.startswith("usage_usec "):
                    usec = _number(line.split()[1])
                    return None if usec is None else usec / 1e6
            return None
        usage = _number(_read(os.path.join(self._cgroup["cpu"], "cpuacct.usage")))
        return None if usage is None else usage / 1e9

    def _cgroup_cpus(self) -> float:
        """The CPUs it may use: its quota, else its cpuset, else all."""
        try:
            if self._cgroup["version"] == 2:
                text = _read(os.path.join(self._cgroup["quota"], "cpu.max"))
                quota = parse_cpu_max(text) if text else None
                if quota is None:
                    cpuset = _read(os.path.join(self._cgroup["quota"], "cpuset.cpus.effective"))
                    quota = count_cpu_list(cpuset) if cpuset else None
            else:
                q = _number(_read(os.path.join(self._cgroup["quota"], "cpu.cfs_quota_us")))
                period = _number(_read(os.path.join(self._cgroup["quota"], "cpu.cfs_period_us")))
                quota = q / period if q is not None and q > 0 and period else None
        except ValueError:
            quota = None
        return quota or self._host_cpus

    def take(self, seconds: float, nvml=None) -> Tuple[List[Measurement], List[str], list]:
        """The job's measurements since the previous take (`seconds` ago),
        one line per source that failed, and per-GPU values as (UUID,
        {name: (value, unit)})."""
        out: List[Measurement] = []
        errors: List[str] = []
        processes = self._processes()
        if not processes:
            errors.append("job: process %d is gone" % self._root.pid)
        now = self._cpu_times()
        if seconds > 0:
            used = sum(t - self._previous[pid] for pid, t in now.items()
                       if pid in self._previous and t >= self._previous[pid])
            out.append(measurement("process_cpu_util", 100.0 * used / seconds))
        self._previous = now
        rss = 0
        for p in processes:
            try:
                rss += p.memory_info().rss
            except psutil.Error:
                pass
        out.append(measurement("process_memory_rss", float(rss)))
        gpus = []
        if nvml is not None:
            pids = {p.pid for p in processes}
            for uuid, used_bytes in nvml.process_memory(pids):
                gpus.append((uuid, {"process_gpu_memory": (float(used_bytes),
                                                            UNITS["process_gpu_memory"])}))
        if self._cgroup:
            usage = self._cgroup_usage()
            if usage is None:
                errors.append("cgroup: its CPU time cannot be read")
            elif self._previous_usage is not None and seconds > 0 and \
                    usage >= self._previous_usage:
                out.append(measurement("cgroup_cpu_util", 100.0 * (usage - self._previous_usage)
                                       / seconds / self._cgroup_cpus()))
            self._previous_usage = usage
            memory = self._cgroup["memory"]
            if self._cgroup["version"] == 2:
                used, limit = (_read(os.path.join(memory, "memory.current")),
                               _read(os.path.join(memory, "memory.max")))
            else:
                used, limit = (_read(os.path.join(memory, "memory.usage_in_bytes")),
                               _read(os.path.join(memory, "memory.limit_in_bytes")))
            if _number(used) is not None:
                out.append(measurement("cgroup_memory_used", float(_number(used))))
            else:
                errors.append("cgroup: its memory use cannot be read")
            if memory_limit(limit) is not None:
                out.append(measurement("cgroup_memory_limit", float(memory_limit(limit))))
        return out, errors, gpus

"""One host's system metrics through psutil, with the names, units and
rules of metrics-agent (client/system_sampler.cc): CPU utilisation,
available memory, disk IOPS and throughput of whole disks, and network
throughput without loopback. Rates come from the change of counters between
two samples; a counter that went down wrapped at 32 bits or was reset.

Thread-compatible: one sampler thread takes samples.
"""
import contextlib
import os
import re
import socket
import threading
from typing import Dict, List, Optional, Tuple

import psutil

from ._nvml import inventory_text
from ._signals import NETWORK_DEVICES_LEFT_OUT, measurement

Measurement = Tuple[str, float, str]  # (name, value, unit)

_VIRTUAL_DISK = re.compile(r"^(loop|ram|zram|dm-|md)")
_procfs_lock = threading.Lock()


def counter_delta(previous: int, current: int) -> Optional[int]:
    """How much a counter grew; None when it was reset (the growth is
    unknown). A 32-bit counter that went down wrapped."""
    if current >= previous:
        return current - previous
    if previous < (1 << 32):
        return current + (1 << 32) - previous
    return None


def whole_disks(names) -> List[str]:
    """Disks only: no partitions (sda1, nvme0n1p2: another listed device's
    name and a number, maybe after "p") and no virtual devices that count
    the same I/O twice or are not disks."""
    names = [n for n in names if not _VIRTUAL_DISK.match(n)]
    listed = set(names)

    def is_partition(name):
        for disk in listed:
            if disk != name and name.startswith(disk):
                rest = name[len(disk):]
                rest = rest[1:] if rest.startswith("p") else rest
                if rest.isdigit():
                    return True
        return False

    return [n for n in names if not is_partition(n)]


class HostSampler:
    """Reads psutil's counters. `procfs_path` points psutil at another
    proc(5) tree (tests use recorded files); it is psutil's global setting,
    so it is set only around this sampler's reads."""

    def __init__(self, procfs_path: str = "/proc"):
        self._procfs_path = procfs_path
        self._previous = self._counters([])

    @contextlib.contextmanager
    def _procfs(self):
        if self._procfs_path == psutil.PROCFS_PATH:
            yield
            return
        with _procfs_lock:
            saved, psutil.PROCFS_PATH = psutil.PROCFS_PATH, self._procfs_path
            try:
                yield
            finally:
                psutil.PROCFS_PATH = saved

    def _counters(self, errors: List[str]) -> Dict[str, object]:
        counters: Dict[str, object] = {}
        with self._procfs():
            for key, read in (
                    ("cpu", lambda: psutil.cpu_times()),
                    ("disks", lambda: psutil.disk_io_counters(perdisk=True, nowrap=False)),
                    ("net", lambda: psutil.net_io_counters(pernic=True, nowrap=False))):
                try:
                    counters[key] = read()
                except (OSError, ValueError, AssertionError) as e:
                    errors.append("%s: %s" % (key, e))
        return counters

    def take(self, seconds: float) -> Tuple[List[Measurement], List[str]]:
        """The measurements since the previous take (`seconds` ago), and one
        line per source that failed this time."""
        errors: List[str] = []
        now = self._counters(errors)
        before, self._previous = self._previous, now
        out: List[Measurement] = []
        if "cpu" in now and "cpu" in before:
            # user nice system idle iowait irq softirq steal; guest time is
            # already inside user and nice.
            t0, t1 = before["cpu"], now["cpu"]
            fields = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
            total = sum(getattr(t1, f) - getattr(t0, f) for f in fields)
            idle = (t1.idle - t0.idle) + (t1.iowait - t0.iowait)
            if total > 0 and total - idle >= 0:
                out.append(measurement("cpu_util_simple",
                                       min(100.0, 100.0 * (total - idle) / total)))
        if seconds > 0 and "disks" in now and "disks" in before:
            d0, d1 = before["disks"], now["disks"]
            disks = [n for n in whole_disks(d1) if n in d0]

            def rate(field, unit=1):
                # The kernel counts sectors of 512 bytes (psutil multiplies);
                # a wrap is one of the sector counter.
                deltas = (counter_delta(getattr(d0[n], field) // unit,
                                        getattr(d1[n], field) // unit) for n in disks)
                return unit * sum(d for d in deltas if d is not None) / seconds

            out.append(measurement("disk_iops", rate("read_count") + rate("write_count")))
            out.append(measurement("disk_throughput_read", rate("read_bytes", 512)))
            out.append(measurement("disk_throughput_write", rate("write_bytes", 512)))
        if seconds > 0 and "net" in now and "net" in before:
            n0, n1 = before["net"], now["net"]
            nics = [n for n in n1 if n not in NETWORK_DEVICES_LEFT_OUT and n in n0]

            def net_rate(field):
                deltas = (counter_delta(getattr(n0[n], field), getattr(n1[n], field))
                          for n in nics)
                return sum(d for d in deltas if d is not None) / seconds

            out.append(measurement("net_throughput_sent", net_rate("bytes_sent")))
            out.append(measurement("net_throughput_recv", net_rate("bytes_recv")))
        try:
            with self._procfs():
                out.append(measurement("memory_free", float(psutil.virtual_memory().available)))
        except (OSError, ValueError, AssertionError) as e:
            errors.append("memory: %s" % e)
        return out, errors


def host_inventory(procfs_path: str, agent_version: str) -> Dict[str, object]:
    """This host's part of the agent inventory (AgentInventory fields), as
    metrics-agent reads it (client/host_inventory.cc): the CPU model and
    packages from cpuinfo, logical CPUs, total memory, the host name. What
    cannot be read is left out."""
    inventory: Dict[str, object] = {"host_name": inventory_text(socket.gethostname()),
                                    "agent_version": agent_version}
    try:
        with open(os.path.join(procfs_path, "cpuinfo")) as f:
            model, packages, threads = "", set(), 0
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "processor":
                    threads += 1
                elif key in ("model name", "Model") and not model:
                    model = value
                elif key == "physical id":
                    packages.add(value)
        if threads:
            inventory.update(cpu_model=inventory_text(model), cpu_sockets=len(packages) or 1,
                             cpu_count=threads)
    except OSError:
        pass
    try:
        with open(os.path.join(procfs_path, "meminfo")) as f:
            for line in f:
                if line.startswith("MemTotal:") and line.rstrip().endswith(" kB"):
                    inventory["memory_total_bytes"] = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return inventory

"""GPU readings (utilisation, memory, power, temperature, clocks, PCIe
throughput, ECC errors, throttling; memory of each MIG device) and what the
GPUs are (describe: model, driver, CUDA, MIG) through NVIDIA's management library
(libnvidia-ml.so.1), loaded at run time with ctypes: no CUDA or NVIDIA
Python package is needed, and a host without NVIDIA GPUs simply has none.
The same calls, names, units and scales as metrics-agent (client/nvml.cc):
both are made from the vocabulary's table (_signals.py); a signal
a GPU does not support is said once (take_notes) and left out.

Thread-compatible: one sampler thread reads at a time.
"""
import ctypes
from typing import Dict, List, Optional, Tuple

from ._signals import (MAX_INVENTORY_GPUS, MAX_INVENTORY_TEXT, MAX_MIG_DEVICES_PER_GPU,
                       OPTIONAL_NVML, UNITS)

_SUCCESS = 0
_NOT_SUPPORTED = 3
_NOT_FOUND = 6
_INSUFFICIENT_SIZE = 7
_NOT_AVAILABLE = (1 << 64) - 1  # NVML's "no value" for a process's memory
_UUID_BUFFER = 96
_TEXT_BUFFER = 96
# MIG slots asked at most per GPU (NVML's GPUs have 7).
_MAX_MIG_SLOTS = 16


def inventory_text(raw) -> str:
    """Printable ASCII within the server's bound: any other character
    becomes "?" (a control character would refuse the batch)."""
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    return "".join(c if " " <= c <= "~" else "?" for c in text[:MAX_INVENTORY_TEXT])


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class _ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class NvmlError(Exception):
    pass


def _value(name: str, value) -> Tuple[float, str]:
    return float(value), UNITS[name]


def _memory_values(memory: "_Memory") -> Dict[str, Tuple[float, str]]:
    return {"gpu_free_memory": _value("gpu_free_memory", memory.free),
            "gpu_memory_used": _value("gpu_memory_used", memory.used),
            "gpu_memory_total": _value("gpu_memory_total", memory.total)}


class Nvml:
    """Opens `library` and initialises NVML; NvmlError saying why not."""

    def __init__(self, library: str = "libnvidia-ml.so.1"):
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as e:
            # The usual case (no NVIDIA driver) in the words a user searches for.
            if "No such file" in str(e) or "cannot open shared object" in str(e):
                raise NvmlError("%s not found" % library) from None
            raise NvmlError("cannot load %s: %s" % (library, e)) from None
        lib = self._lib
        for name in ("nvmlInit_v2", "nvmlShutdown", "nvmlErrorString",
                     "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
                     "nvmlDeviceGetUUID", "nvmlDeviceGetUtilizationRates",
                     "nvmlDeviceGetMemoryInfo"):
            if not hasattr(lib, name):
                raise NvmlError("%s has no %s (not NVML?)" % (library, name))
        lib.nvmlErrorString.restype = ctypes.c_char_p
        lib.nvmlErrorString.argtypes = [ctypes.c_int]
        lib.nvmlDeviceGetHandleByIndex_v2.argtypes = [ctypes.c_uint,
                                                      ctypes.POINTER(ctypes.c_void_p)]
        lib.nvmlDeviceGetUUID.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint]
        lib.nvmlDeviceGetUtilizationRates.argtypes = [ctypes.c_void_p,
                                                      ctypes.POINTER(_Utilization)]
        lib.nvmlDeviceGetMemoryInfo.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Memory)]
        # A call the library lacks (an old driver) leaves its signals out.
        self._calls = {call: getattr(lib, call, None) for _, _, call, _, _, _ in OPTIONAL_NVML}
        self._check("nvmlInit_v2", lib.nvmlInit_v2())
        self._devices: List[ctypes.c_void_p] = []
        self.uuids: List[str] = []
        self._mig_modes: List[str] = []  # per GPU: "enabled", "disabled", ""
        self._mig_devices: List[Tuple[int, ctypes.c_void_p, str]] = []  # GPU, handle, UUID
        self._unsupported: List[set] = []
        self._notes: List[str] = []
        try:
            count = ctypes.c_uint()
            self._check("nvmlDeviceGetCount_v2", lib.nvmlDeviceGetCount_v2(ctypes.byref(count)))
            for i in range(count.value):
                device = ctypes.c_void_p()
                self._check("GPU %d: nvmlDeviceGetHandleByIndex_v2" % i,
                            lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(device)))
                self.uuids.append(self._uuid(device, "GPU %d: " % i))
                self._devices.append(device)
                self._unsupported.append(set())
                self._find_mig_devices(i)
        except NvmlError:
            lib.nvmlShutdown()
            raise

    def _uuid(self, device, where: str) -> str:
        uuid = ctypes.create_string_buffer(_UUID_BUFFER + 1)
        self._check(where + "nvmlDeviceGetUUID",
                    self._lib.nvmlDeviceGetUUID(device, uuid, _UUID_BUFFER))
        # NVML promises a NUL within the buffer; one that breaks it must not
        # make us read past it.
        raw = uuid.raw[:_UUID_BUFFER]
        if b"\0" not in raw:
            raise NvmlError(where + "nvmlDeviceGetUUID answered no NUL-terminated UUID")
        return raw.split(b"\0", 1)[0].decode("ascii", "replace")

    def _optional(self, call: str, *args) -> bool:
        """Calls an optional entry point; True when it answered."""
        function = getattr(self._lib, call, None)
        return function is not None and function(*args) == _SUCCESS

    def _find_mig_devices(self, gpu: int) -> None:
        """The GPU's MIG mode and, when on, its MIG devices (as at start)."""
        device = self._devices[gpu]
        current, pending, slots = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        if not self._optional("nvmlDeviceGetMigMode", device, ctypes.byref(current),
                              ctypes.byref(pending)):
            self._mig_modes.append("")
            return
        self._mig_modes.append("enabled" if current.value == 1 else "disabled")
        get = getattr(self._lib, "nvmlDeviceGetMigDeviceHandleByIndex", None)
        if current.value != 1 or get is None or not self._optional(
                "nvmlDeviceGetMaxMigDeviceCount", device, ctypes.byref(slots)):
            return
        get.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)]
        for slot in range(min(slots.value, _MAX_MIG_SLOTS)):
            if sum(1 for g, _, _ in self._mig_devices if g == gpu) >= MAX_MIG_DEVICES_PER_GPU:
                break
            mig = ctypes.c_void_p()
            result = get(device, slot, ctypes.byref(mig))
            if result == _NOT_FOUND:
                continue  # an empty slot
            try:
                self._check("nvmlDeviceGetMigDeviceHandleByIndex", result)
                uuid = self._uuid(mig, "")
            except NvmlError as e:
                self._notes.append("%s: MIG device %d left out (%s)"
                                   % (self.uuids[gpu], slot, e))
                continue
            self._mig_devices.append((gpu, mig, uuid))

    @property
    def mig_uuids(self) -> List[str]:
        return [uuid for _, _, uuid in self._mig_devices]

    def describe(self) -> Dict[str, object]:
        """Driver and CUDA versions and each GPU, as AgentInventory fields."""
        text = ctypes.create_string_buffer(_TEXT_BUFFER)
        inventory: Dict[str, object] = {}
        if self._optional("nvmlSystemGetDriverVersion", text, _TEXT_BUFFER):
            inventory["driver_version"] = inventory_text(text.value)
        cuda = ctypes.c_int()
        if (self._optional("nvmlSystemGetCudaDriverVersion_v2", ctypes.byref(cuda)) or
                self._optional("nvmlSystemGetCudaDriverVersion", ctypes.byref(cuda))) \
                and cuda.value > 0:
            inventory["cuda_version"] = "%d.%d" % (cuda.value // 1000, cuda.value % 1000 // 10)
        gpus = []
        for i, (uuid, device) in enumerate(zip(self.uuids[:MAX_INVENTORY_GPUS], self._devices)):
            gpu = {"index": i, "uuid": inventory_text(uuid), "mig_mode": self._mig_modes[i],
                   "mig_devices": [inventory_text(m) for g, _, m in self._mig_devices if g == i]}
            name, memory = ctypes.create_string_buffer(_TEXT_BUFFER), _Memory()
            if self._optional("nvmlDeviceGetName", device, name, _TEXT_BUFFER):
                gpu["name"] = inventory_text(name.value)
            if self._lib.nvmlDeviceGetMemoryInfo(device, ctypes.byref(memory)) == _SUCCESS:
                gpu["memory_total_bytes"] = memory.total
            gpus.append(gpu)
        inventory["gpus"] = gpus
        return inventory

    def _check(self, call: str, result: int) -> None:
        if result != _SUCCESS:
            text = self._lib.nvmlErrorString(result)
            raise NvmlError("%s failed: %s (%d)" % (
                call, text.decode("ascii", "replace") if text else "error", result))

    def _error(self, call: str, result: int) -> str:
        text = self._lib.nvmlErrorString(result)
        return "%s: %s" % (call, text.decode("ascii", "replace") if text else "error")

    def read(self) -> List[Tuple[str, Dict[str, Tuple[float, str]]]]:
        """Per GPU that answers, its UUID and signal name -> (value, unit);
        NvmlError when none does."""
        readings, errors = [], []
        utilization, memory = _Utilization(), _Memory()
        for i, (uuid, device) in enumerate(zip(self.uuids, self._devices)):
            try:
                self._check("nvmlDeviceGetMemoryInfo",
                            self._lib.nvmlDeviceGetMemoryInfo(device, ctypes.byref(memory)))
                # A GPU in MIG mode has no utilisation of its own.
                answered = self._lib.nvmlDeviceGetUtilizationRates(device, ctypes.byref(utilization))
                if answered != _NOT_SUPPORTED:
                    self._check("nvmlDeviceGetUtilizationRates", answered)
            except NvmlError as e:
                errors.append("%s: %s" % (uuid, e))
                continue
            values = {}
            if answered == _SUCCESS:
                values["gpu_util"] = _value("gpu_util", utilization.gpu)
            values.update(_memory_values(memory))
            if answered == _SUCCESS:
                values["gpu_memory_util"] = _value("gpu_memory_util", utilization.memory)
            for name, unit, call, args, wide, scale in OPTIONAL_NVML:
                if name in self._unsupported[i]:
                    continue
                function, out = self._calls[call], (ctypes.c_ulonglong() if wide
                                                     else ctypes.c_uint())
                result = (function(device, *args, ctypes.byref(out))
                          if function is not None else None)
                if result == _SUCCESS:
                    values[name] = (out.value * scale, unit)
                elif result in (_NOT_SUPPORTED, None):
                    # Asked once: a GPU does not start supporting it later.
                    self._unsupported[i].add(name)
                    self._notes.append("%s: %s is not supported (%s); not reported" % (
                        uuid, name, self._error(call, result) if result is not None
                        else call + ": not in the library"))
            readings.append((uuid, values))
        for _, device, uuid in self._mig_devices:
            result = self._lib.nvmlDeviceGetMemoryInfo(device, ctypes.byref(memory))
            if result != _SUCCESS:
                errors.append("%s: %s" % (uuid, self._error("nvmlDeviceGetMemoryInfo", result)))
                continue
            readings.append((uuid, _memory_values(memory)))
        if not readings and errors:
            raise NvmlError("; ".join(errors))
        return readings

    def compute_processes(self) -> List[Tuple[str, List[Tuple[int, Optional[int]]]]]:
        """Per GPU that can say, its UUID and the compute processes NVML
        lists on it (nvmlDeviceGetComputeRunningProcesses), as (pid, bytes
        of GPU memory or None where NVML cannot say); a GPU that cannot is
        said once (take_notes) and left out."""
        get = (getattr(self._lib, "nvmlDeviceGetComputeRunningProcesses_v3", None) or
               getattr(self._lib, "nvmlDeviceGetComputeRunningProcesses_v2", None))
        listed = []
        for i, (uuid, device) in enumerate(zip(self.uuids, self._devices)):
            if "process_gpu_memory" in self._unsupported[i]:
                continue
            result, room = _INSUFFICIENT_SIZE, 64
            # Processes may start between the calls: ask again, once, with room.
            for _ in range(2):
                if result != _INSUFFICIENT_SIZE or get is None:
                    break
                count = ctypes.c_uint(min(room + 16, 4096))
                infos = (_ProcessInfo * count.value)()
                result = get(device, ctypes.byref(count), infos)
                room = count.value
            if get is None or result == _NOT_SUPPORTED:
                self._unsupported[i].add("process_gpu_memory")
                self._notes.append("%s: process_gpu_memory is not supported (%s); not reported"
                                   % (uuid, "nvmlDeviceGetComputeRunningProcesses: " +
                                      ("not in the library" if get is None else
                                       self._error("", result).lstrip(": "))))
                continue
            if result != _SUCCESS:
                continue  # this sample goes without it
            listed.append((uuid, [
                (info.pid, None if info.usedGpuMemory == _NOT_AVAILABLE else info.usedGpuMemory)
                for info in infos[:min(count.value, len(infos))]]))
        return listed

    def process_memory(self, pids) -> List[Tuple[str, int]]:
        """Per GPU that can say, its UUID and the GPU memory the processes
        `pids` use (from compute_processes)."""
        return [(uuid, sum(used for pid, used in processes if pid in pids and used is not None))
                for uuid, processes in self.compute_processes()]

    def take_notes(self) -> List[str]:
        """One line per signal found unsupported since the last call."""
        notes, self._notes = self._notes, []
        return notes

    def close(self) -> None:
        self._lib.nvmlShutdown()

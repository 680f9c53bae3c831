"""GPU readings (utilisation, memory, power, temperature, clocks, PCIe
throughput, ECC errors, throttling) through NVIDIA's management library
(libnvidia-ml.so.1), loaded at run time with ctypes: no CUDA or NVIDIA
Python package is needed, and a host without NVIDIA GPUs simply has none.
The same calls, names and units as metrics-agent (client/nvml.cc); a signal
a GPU does not support is said once (take_notes) and left out.

Thread-compatible: one sampler thread reads at a time.
"""
import ctypes
from typing import Dict, List, Tuple

_SUCCESS = 0
_NOT_SUPPORTED = 3
_UUID_BUFFER = 96
_uint, _ull = ctypes.c_uint, ctypes.c_ulonglong

# The optional signals: name, unit, NVML call, its leading int arguments
# (NVML's enum values), the output's C type and the scale to the unit.
_SIGNALS = [
    ("gpu_power", "watts", "nvmlDeviceGetPowerUsage", (), _uint, 1e-3),
    ("gpu_power_limit", "watts", "nvmlDeviceGetEnforcedPowerLimit", (), _uint, 1e-3),
    ("gpu_temperature", "celsius", "nvmlDeviceGetTemperature", (0,), _uint, 1),
    ("gpu_sm_clock", "hertz", "nvmlDeviceGetClockInfo", (1,), _uint, 1e6),
    ("gpu_memory_clock", "hertz", "nvmlDeviceGetClockInfo", (2,), _uint, 1e6),
    ("gpu_pcie_rx", "bytes/s", "nvmlDeviceGetPcieThroughput", (1,), _uint, 1024),
    ("gpu_pcie_tx", "bytes/s", "nvmlDeviceGetPcieThroughput", (0,), _uint, 1024),
    ("gpu_ecc_corrected", "errors", "nvmlDeviceGetTotalEccErrors", (0, 0), _ull, 1),
    ("gpu_ecc_uncorrected", "errors", "nvmlDeviceGetTotalEccErrors", (1, 0), _ull, 1),
    ("gpu_throttle_reasons", "bitset", "nvmlDeviceGetCurrentClocksThrottleReasons", (),
     _ull, 1),
]


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class NvmlError(Exception):
    pass


class Nvml:
    """Opens `library` and initialises NVML; NvmlError saying why not."""

    def __init__(self, library: str = "libnvidia-ml.so.1"):
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as e:
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
        self._calls = {call: getattr(lib, call, None) for _, _, call, _, _, _ in _SIGNALS}
        self._check("nvmlInit_v2", lib.nvmlInit_v2())
        self._devices: List[ctypes.c_void_p] = []
        self.uuids: List[str] = []
        self._unsupported: List[set] = []
        self._notes: List[str] = []
        try:
            count = ctypes.c_uint()
            self._check("nvmlDeviceGetCount_v2", lib.nvmlDeviceGetCount_v2(ctypes.byref(count)))
            for i in range(count.value):
                device = ctypes.c_void_p()
                self._check("GPU %d: nvmlDeviceGetHandleByIndex_v2" % i,
                            lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(device)))
                uuid = ctypes.create_string_buffer(_UUID_BUFFER + 1)
                self._check("GPU %d: nvmlDeviceGetUUID" % i,
                            lib.nvmlDeviceGetUUID(device, uuid, _UUID_BUFFER))
                # NVML promises a NUL within the buffer; one that breaks it
                # must not make us read past it.
                raw = uuid.raw[:_UUID_BUFFER]
                if b"\0" not in raw:
                    raise NvmlError("GPU %d: nvmlDeviceGetUUID answered no "
                                    "NUL-terminated UUID" % i)
                self._devices.append(device)
                self._unsupported.append(set())
                self.uuids.append(raw.split(b"\0", 1)[0].decode("ascii", "replace"))
        except NvmlError:
            lib.nvmlShutdown()
            raise

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
                self._check("nvmlDeviceGetUtilizationRates",
                            self._lib.nvmlDeviceGetUtilizationRates(device, ctypes.byref(utilization)))
                self._check("nvmlDeviceGetMemoryInfo",
                            self._lib.nvmlDeviceGetMemoryInfo(device, ctypes.byref(memory)))
            except NvmlError as e:
                errors.append("%s: %s" % (uuid, e))
                continue
            values = {
                "gpu_util": (float(utilization.gpu), "percent"),
                "gpu_free_memory": (float(memory.free), "bytes"),
                "gpu_memory_used": (float(memory.used), "bytes"),
                "gpu_memory_total": (float(memory.total), "bytes"),
                "gpu_memory_util": (float(utilization.memory), "percent"),
            }
            for name, unit, call, args, ctype, scale in _SIGNALS:
                if name in self._unsupported[i]:
                    continue
                function, out = self._calls[call], ctype()
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
        if not readings and errors:
            raise NvmlError("; ".join(errors))
        return readings

    def take_notes(self) -> List[str]:
        """One line per signal found unsupported since the last call."""
        notes, self._notes = self._notes, []
        return notes

    def close(self) -> None:
        self._lib.nvmlShutdown()

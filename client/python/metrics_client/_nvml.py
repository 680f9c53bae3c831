"""GPU utilisation and free memory through NVIDIA's management library
(libnvidia-ml.so.1), loaded at run time with ctypes: no CUDA or NVIDIA
Python package is needed, and a host without NVIDIA GPUs simply has none.
The same calls, names and units as metrics-agent (client/nvml.cc).

Thread-compatible: one sampler thread reads at a time.
"""
import ctypes
from typing import List, Tuple

_SUCCESS = 0
_UUID_BUFFER = 96


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
        self._check("nvmlInit_v2", lib.nvmlInit_v2())
        self._devices: List[ctypes.c_void_p] = []
        self.uuids: List[str] = []
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
                self.uuids.append(raw.split(b"\0", 1)[0].decode("ascii", "replace"))
        except NvmlError:
            lib.nvmlShutdown()
            raise

    def _check(self, call: str, result: int) -> None:
        if result != _SUCCESS:
            text = self._lib.nvmlErrorString(result)
            raise NvmlError("%s failed: %s (%d)" % (
                call, text.decode("ascii", "replace") if text else "error", result))

    def read(self) -> List[Tuple[str, float, int]]:
        """(uuid, utilisation percent, free memory bytes) per GPU that
        answers; NvmlError when none does."""
        readings, errors = [], []
        utilization, memory = _Utilization(), _Memory()
        for uuid, device in zip(self.uuids, self._devices):
            try:
                self._check("nvmlDeviceGetUtilizationRates",
                            self._lib.nvmlDeviceGetUtilizationRates(device, ctypes.byref(utilization)))
                self._check("nvmlDeviceGetMemoryInfo",
                            self._lib.nvmlDeviceGetMemoryInfo(device, ctypes.byref(memory)))
            except NvmlError as e:
                errors.append("%s: %s" % (uuid, e))
                continue
            readings.append((uuid, float(utilization.gpu), memory.free))
        if not readings and errors:
            raise NvmlError("; ".join(errors))
        return readings

    def close(self) -> None:
        self._lib.nvmlShutdown()

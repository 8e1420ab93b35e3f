"""A fake NVML at the library boundary: a `pynvml` module object with the functions nvidia-ml-py
(12, 13) has and the return types it gives (ctypes structures with its field layout, an opaque
handle, NVMLError with its `value`), to put in sys.modules where the sampler imports it."""

from __future__ import annotations

import ctypes
import types


class c_nvmlUtilization_t(ctypes.Structure):  # pynvml's own field layout
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class c_nvmlMemory_t(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class c_nvmlMemory_v2_t(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("total", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        self.value = value

    def __str__(self) -> str:
        return {12: "NVML Shared Library Not Found", 13: "Function Not Found", 15: "GPU is lost"}.get(
            self.value, f"NVML error {self.value}"
        )


GIB = 1 << 30


def fake_nvml(
    utilization=(90, 10),
    used=(3 * GIB, 1 * GIB),
    total=16 * GIB,
    init_error=None,
    fail_after=None,
    reserved=0,
    memory_v2=True,
):
    """A pynvml as nvidia-ml-py 12/13 has it: init, count, handles, utilisation, memory, name, shutdown.
    `reserved`: what the driver keeps for itself, counted as used by the first memory reading and not
    by v2's (`used` is what the processes hold); `memory_v2`: True, a binding and driver with v2;
    False, a binding without it; "refused", a driver whose library lacks nvmlDeviceGetMemoryInfo_v2."""
    nvml = types.ModuleType("pynvml")
    calls = {"init": 0, "shutdown": 0, "samples": 0}
    nvml.NVMLError = NVMLError
    nvml.c_nvmlUtilization_t, nvml.c_nvmlMemory_t = c_nvmlUtilization_t, c_nvmlMemory_t
    if memory_v2:
        nvml.c_nvmlMemory_v2_t = c_nvmlMemory_v2_t
        nvml.nvmlMemory_v2 = ctypes.sizeof(c_nvmlMemory_v2_t) | (2 << 24)  # as pynvml computes it

    def nvmlInit():
        calls["init"] += 1
        if init_error is not None:
            raise NVMLError(init_error)

    def nvmlShutdown():
        calls["shutdown"] += 1

    def nvmlDeviceGetCount():
        return len(utilization)

    def nvmlDeviceGetHandleByIndex(index):
        if not 0 <= index < len(utilization):
            raise NVMLError(2)
        return ctypes.c_void_p(0x1000 + index)  # the real one hands an opaque pointer

    def nvmlDeviceGetName(handle):
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUtilizationRates(handle):
        index = handle.value - 0x1000
        if index == 0:
            calls["samples"] += 1
        if fail_after is not None and calls["samples"] > fail_after:
            raise NVMLError(15)
        return c_nvmlUtilization_t(gpu=utilization[index], memory=5)

    def nvmlDeviceGetMemoryInfo(handle, version=None):
        index = handle.value - 0x1000
        if not version:
            return c_nvmlMemory_t(total=total, free=total - used[index] - reserved, used=used[index] + reserved)
        if memory_v2 == "refused":
            raise NVMLError(13)  # NVML_ERROR_FUNCTION_NOT_FOUND
        return c_nvmlMemory_v2_t(
            version=version, total=total, reserved=reserved, free=total - used[index] - reserved, used=used[index]
        )

    for function in (
        nvmlInit,
        nvmlShutdown,
        nvmlDeviceGetCount,
        nvmlDeviceGetHandleByIndex,
        nvmlDeviceGetName,
        nvmlDeviceGetUtilizationRates,
        nvmlDeviceGetMemoryInfo,
    ):
        setattr(nvml, function.__name__, function)
    nvml.calls = calls
    return nvml

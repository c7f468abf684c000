"""Monitoring: ``torch.foo.utilization``, ``memory_usage``, ``temperature``, ``power_draw``,
``clock_rate``, ``device_memory_used`` and ``list_gpu_processes``, as torch.cuda's.

torch.cuda reads them from NVML; here each is a query of the foo runtime
(fooDeviceGetMetric, fooDeviceGetProcesses, fooMemGetInfo), which a hardware port answers from its
driver. The emulated device measures its utilisation (the time its stream workers spend on
kernels, and on copies and fills) and has no temperature or power sensor and no clock: those
raise RuntimeError saying so, as torch.cuda's raise when NVML is missing.
"""

from typing import Any

from . import _C
from ._utils import _get_device_index

# fooDeviceMetric (csrc/runtime/runtime.h)
_UTILIZATION, _MEMORY_UTILIZATION, _TEMPERATURE, _POWER_DRAW, _CLOCK_RATE = range(5)


def _metric(device: Any, metric: int) -> int:
    return _C._device_metric(_get_device_index(device, optional=True), metric)


def utilization(device: Any = None) -> int:
    """Percent of the time since the previous call for `device` (since the process started, for the
    first) during which at least one kernel ran on it. Each call starts a new window, as an NVML
    sample period does."""
    return _metric(device, _UTILIZATION)


def memory_usage(device: Any = None) -> int:
    """Percent of the time since the previous call for `device` during which its memory was being
    read or written (on the emulated device: copies and fills; a kernel's own accesses count as
    utilization)."""
    return _metric(device, _MEMORY_UTILIZATION)


def temperature(device: Any = None) -> int:
    """The device's temperature in degrees Celsius; RuntimeError if it has no sensor (the emulated
    device has none)."""
    return _metric(device, _TEMPERATURE)


def power_draw(device: Any = None) -> int:
    """The device's power draw in milliwatts; RuntimeError if it has no sensor (the emulated device
    has none)."""
    return _metric(device, _POWER_DRAW)


def clock_rate(device: Any = None) -> int:
    """The device's compute clock in MHz; RuntimeError if it reports none (the emulated device's
    kernels run on host threads, it has no clock of its own)."""
    return _metric(device, _CLOCK_RATE)


def device_memory_used(device: Any = None) -> int:
    """Bytes of the device's memory in use, by every process (the device's own count: what
    mem_get_info calls total minus free)."""
    free, total = _C._mem_get_info(_get_device_index(device, optional=True))
    return total - free


def list_gpu_processes(device: Any = None) -> str:
    """The processes that hold memory of `device` and how much, in torch.cuda.list_gpu_processes's
    format (an emulated device belongs to its process: it lists this one once it holds memory)."""
    index = _get_device_index(device, optional=True)
    lines = [f"GPU:{index}"]
    processes = _C._device_processes(index)
    if not processes:
        lines.append("no processes are running")
    for pid, used in processes:
        lines.append(f"process {pid:>10d} uses {used / (1024 * 1024):>12.3f} MB GPU memory")
    return "\n".join(lines)

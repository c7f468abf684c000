"""Device memory: ``torch.foo.memory_allocated``, ``memory_stats``, ``empty_cache`` and friends.

foo tensors get their memory from a caching allocator, as CUDA tensors do: freed blocks stay
reserved for reuse, so ``memory_reserved`` is at least ``memory_allocated``, and ``empty_cache``
hands the unused part back to the device. The same numbers are available through
``torch.accelerator.memory_*`` while foo is the accelerator.
"""

from collections import OrderedDict
from typing import Any

from . import _C
from ._utils import _get_device_index


def memory_stats(device: Any = None) -> "OrderedDict[str, Any]":
    """The caching allocator's statistics for `device`, with torch.cuda.memory_stats's keys
    ("allocated_bytes.all.current", "reserved_bytes.small_pool.peak", "num_ooms", ...)."""
    stats = _C._memory_stats(_get_device_index(device, optional=True))
    flat: list[tuple[str, Any]] = []

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                flatten(f"{prefix}.{key}" if prefix else key, item)
        else:
            flat.append((prefix, value))

    flatten("", stats)
    return OrderedDict(sorted(flat))


def memory_allocated(device: Any = None) -> int:
    """Bytes held by tensors on `device`."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    """Peak of memory_allocated since the start or the last reset_peak_memory_stats."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    """Bytes the caching allocator holds on `device` (allocated plus cached)."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: Any = None) -> int:
    """Peak of memory_reserved since the start or the last reset_peak_memory_stats."""
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Any = None) -> None:
    _C._reset_peak_memory_stats(_get_device_index(device, optional=True))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _C._reset_accumulated_memory_stats(_get_device_index(device, optional=True))


def empty_cache() -> None:
    """Hands every cached, unused block of every device back to the device."""
    _C._empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of `device`, as the device reports them (the cache counts as used)."""
    return tuple(_C._mem_get_info(_get_device_index(device, optional=True)))

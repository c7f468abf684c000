"""Device memory: ``torch.foo.memory_allocated``, ``memory_stats``, ``empty_cache`` and friends.

The functions have torch.cuda's names, signatures and behaviour (a limit per process with
``set_per_process_memory_fraction``, raw blocks with ``caching_allocator_alloc``, the pinned host
allocator's statistics with ``host_memory_stats``).

foo tensors get their memory from a caching allocator, as CUDA tensors do: freed blocks stay
reserved for reuse, so ``memory_reserved`` is at least ``memory_allocated``, and ``empty_cache``
hands the unused part back to the device. The same numbers are available through
``torch.accelerator.memory_*`` while foo is the accelerator.

Debugging memory works as with CUDA: ``memory_summary()`` prints the allocator's statistics as a
table; ``_record_memory_history()`` makes the allocator remember where each allocation came from
and what it did, and ``_snapshot()`` / ``_dump_snapshot()`` save that in CUDA's snapshot format,
which https://pytorch.org/memory_viz and ``torch.cuda._memory_viz`` read.
"""

import pickle
import sys
import warnings
from collections import OrderedDict
from typing import Any

import torch

from . import _C
from ._utils import _get_device_index


def memory_stats(device: Any = None) -> "OrderedDict[str, Any]":
    """The caching allocator's statistics for `device`, with torch.cuda.memory_stats's keys
    ("allocated_bytes.all.current", "reserved_bytes.small_pool.peak", "num_ooms", ...)."""
    return _flatten(memory_stats_as_nested_dict(device))


def _flatten(stats: dict[str, Any]) -> "OrderedDict[str, Any]":
    flat: list[tuple[str, Any]] = []

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                flatten(f"{prefix}.{key}" if prefix else key, item)
        else:
            flat.append((prefix, value))

    flatten("", stats)
    return OrderedDict(sorted(flat))


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    """memory_stats as nested dictionaries, as torch.cuda.memory_stats_as_nested_dict returns them
    ({"allocated_bytes": {"all": {"current": ...}}, "num_ooms": ...})."""
    return _C._memory_stats(_get_device_index(device, optional=True))


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


def reset_max_memory_allocated(device: Any = None) -> None:
    """Deprecated alias of reset_peak_memory_stats (which resets every peak), as in torch.cuda."""
    warnings.warn(
        "torch.foo.reset_max_memory_allocated now calls torch.foo.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: Any = None) -> None:
    """Deprecated alias of reset_peak_memory_stats (which resets every peak), as in torch.cuda."""
    warnings.warn(
        "torch.foo.reset_max_memory_cached now calls torch.foo.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def memory_cached(device: Any = None) -> int:
    """Deprecated alias of memory_reserved, as in torch.cuda."""
    warnings.warn(
        "torch.foo.memory_cached has been renamed to torch.foo.memory_reserved",
        FutureWarning,
        stacklevel=2,
    )
    return memory_reserved(device)


def max_memory_cached(device: Any = None) -> int:
    """Deprecated alias of max_memory_reserved, as in torch.cuda."""
    warnings.warn(
        "torch.foo.max_memory_cached has been renamed to torch.foo.max_memory_reserved",
        FutureWarning,
        stacklevel=2,
    )
    return max_memory_reserved(device)


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Limits what the caching allocator takes from `device` to `fraction` (0 to 1) of its capacity.

    A tensor that would take the cache past the limit first makes the allocator hand its unused
    blocks back, then raises torch.OutOfMemoryError; raising the fraction again lets the same
    allocation succeed. The limit counts reserved memory (memory_reserved), as torch.cuda's does.
    """
    index = _get_device_index(device, optional=True)
    if not isinstance(fraction, float | int) or isinstance(fraction, bool):
        raise TypeError(f"Invalid type for fraction argument, must be `float`, got {type(fraction).__name__}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(float(fraction), index)


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The fraction set by set_per_process_memory_fraction for `device` (1.0 until set)."""
    return _C._memory_fraction(_get_device_index(device, optional=True))


def caching_allocator_alloc(size: int, device: Any = None, stream: Any = None) -> int:
    """`size` bytes of device memory from the caching allocator, as an integer address.

    The memory belongs to `stream` (default: the current stream of `device`), as a tensor allocated
    there does. Give it back with caching_allocator_delete; it counts in memory_allocated meanwhile.
    """
    index = _get_device_index(device, optional=True)
    if stream is None:
        stream_id, stream_device = _C._current_stream(index)[:2]
    elif isinstance(stream, torch.Stream) and stream.device.type == "foo":
        stream_id, stream_device = stream.stream_id, stream.device_index
    else:
        raise TypeError(f"Invalid type for stream argument, must be a torch.foo.Stream or None, got {stream!r}")
    if stream_device != index:
        raise ValueError(f"caching_allocator_alloc: the stream is on device {stream_device}, not on device {index}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"caching_allocator_alloc: size must be a non-negative int, got {size!r}")
    return _C._raw_alloc(size, stream_id, index)


def caching_allocator_delete(mem_ptr: int) -> None:
    """Gives back memory from caching_allocator_alloc; raises RuntimeError for any other address."""
    _C._raw_delete(int(mem_ptr))


def get_allocator_backend() -> str:
    """The allocator behind foo tensors: "native", the caching allocator (there is no other)."""
    return "native"


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """Statistics of the pinned host memory allocator (tensor.pin_memory()), nested as
    torch.cuda.host_memory_stats_as_nested_dict returns them: "allocations", "allocated_bytes",
    "active_requests", "active_bytes" (each current, peak, allocated, freed), "num_host_alloc",
    "num_host_free", "host_alloc_time" and "host_free_time" (microseconds)."""
    return _C._host_memory_stats()


def host_memory_stats() -> "OrderedDict[str, Any]":
    """host_memory_stats_as_nested_dict flattened into "allocated_bytes.current"-style keys, sorted."""
    return _flatten(host_memory_stats_as_nested_dict())


def reset_accumulated_host_memory_stats() -> None:
    """Resets the "allocated" and "freed" counts of host_memory_stats."""
    _C._reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    """Resets the "peak" values of host_memory_stats to the current ones."""
    _C._reset_peak_host_memory_stats()


def empty_cache() -> None:
    """Hands every cached, unused block of every device back to the device."""
    _C._empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of `device`, as the device reports them (the cache counts as used)."""
    return tuple(_C._mem_get_info(_get_device_index(device, optional=True)))


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """The allocator's statistics for `device` as a table, laid out as torch.cuda.memory_summary's:
    current, peak, total allocated and total freed, for all blocks and per pool (the large pool
    serves requests above 1 MiB). `abbreviated` leaves out the per-pool rows."""
    index = _get_device_index(device, optional=True)
    stats = memory_stats(index)

    def size(value: int, scale_by: int) -> str:
        units = ("B  ", "KiB", "MiB", "GiB", "TiB")
        unit = 0
        while unit + 1 < len(units) and scale_by >= 768 * 1024:
            value, scale_by, unit = value // 1024, scale_by / 1024, unit + 1
        return f"{value:6d} {units[unit]}"

    def count(value: int, scale_by: int) -> str:
        units = (" ", "K", "M")
        unit = 0
        while unit + 1 < len(units) and scale_by >= 750 * 1000:
            value, scale_by, unit = value // 1000, scale_by / 1000, unit + 1
        return f"{value:7d} {units[unit]} "

    metrics = (
        ("allocated_bytes", "Allocated memory", size),
        ("active_bytes", "Active memory", size),
        ("requested_bytes", "Requested memory", size),
        ("reserved_bytes", "Device reserved memory", size),
        ("inactive_split_bytes", "Non-releasable memory", size),
        ("allocation", "Allocations", count),
        ("active", "Active allocs", count),
        ("segment", "Device reserved segments", count),
        ("inactive_split", "Non-releasable allocs", count),
    )
    pools = (
        [("all", None)]
        if abbreviated
        else [("all", None), ("large_pool", "from large pool"), ("small_pool", "from small pool")]
    )
    rule, double_rule = "-" * 79, "=" * 79
    lines = [
        double_rule,
        f" {'PyTorch foo memory summary, device ID ' + str(index):^77} ",
        rule,
        f"  foo OOMs: {stats['num_ooms']:<12d} | device malloc retries: {stats['num_alloc_retries']:<12d}",
        double_rule,
        f" {'Metric':<25} | {'Cur Usage':^10} | {'Peak Usage':^10} | {'Tot Alloc':^10} | {'Tot Freed':^10} ",
    ]
    for key, title, fmt in metrics:
        lines.append(rule)
        scales = [stats[f"{key}.all.{column}"] for column in ("current", "peak", "allocated", "freed")]
        for pool, label in pools:
            values = [stats[f"{key}.{pool}.{column}"] for column in ("current", "peak", "allocated", "freed")]
            name = title if label is None else "      " + label
            cells = " | ".join(fmt(value, scale) for value, scale in zip(values, scales, strict=True))
            lines.append(f" {name:<25} | {cells} ")
    lines.append(double_rule)
    return "|" + "|\n|".join(lines) + "|\n"


def _record_memory_history(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: Any = None,
    clear_history: bool = False,
) -> None:
    """Starts (or stops, with ``enabled=None``) recording where device memory is allocated, with
    the arguments of torch.cuda.memory._record_memory_history:

    - enabled: None stops recording; "state" keeps the stack trace of each live allocation; "all"
      also keeps a history of every allocator action (at most `max_entries` per device, newest kept).
    - context: which stack traces to keep: None, "state" (live allocations only), "alloc" (also
      with allocations in the history), "all" (also with frees).
    - stacks: "python" for Python frames, "all" to add C++ frames (slower to record and to read).
    - device: accepted for compatibility; recording covers every foo device.
    """
    if isinstance(enabled, bool):
        enabled = "all" if enabled else None
    _C._record_memory_history(enabled, context, stacks, min(max_entries, 2**62), clear_history)


def _snapshot(device: Any = None) -> dict[str, Any]:
    """The allocator's state in CUDA's snapshot format: "segments" (memory taken from each device,
    with its blocks: address, size, requested_size, state and the stack trace of the allocation in
    "frames") and "device_traces" (per device, the history _record_memory_history kept: "alloc",
    "free_requested", "free_completed", "segment_alloc", "segment_free", "oom" entries with
    addr, size, stream, time_us and frames). Covers every device; `device` is accepted for
    compatibility with torch.cuda.memory._snapshot."""
    return _C._memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Saves _snapshot() as a pickle, the file https://pytorch.org/memory_viz opens (drag and drop)."""
    snapshot = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)


def memory_snapshot(mempool_id: Any = None, include_traces: bool = False) -> list[dict[str, Any]]:
    """The segments of _snapshot(), as torch.cuda.memory_snapshot returns them. There are no memory
    pools (`mempool_id` must be None); `include_traces` is accepted for compatibility (the segments
    carry no traces)."""
    if mempool_id is not None:
        raise NotImplementedError("foo has no memory pools: mempool_id must be None")
    return _snapshot()["segments"]

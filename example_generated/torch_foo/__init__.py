"""PyTorch backend for the foo accelerator.

Importing this package (``import torch`` does it too, through the ``torch.backends`` entry point)
makes "foo" a PyTorch device::

    >>> import torch
    >>> torch.ones(2, device="foo") + 1
    tensor([2., 2.], device='foo:0')

It loads the C++ backend (torch_foo._C: kernels, allocator, device guard and hooks for the
PrivateUse1 dispatch key), renames PrivateUse1 to "foo", registers this package as the
device module ``torch.foo`` and generates ``Tensor.foo()``, ``Tensor.is_foo``,
``Module.foo()`` and the storage and PackedSequence equivalents; ``torch.compile`` support
(``compiler.py``) registers itself when the compiler loads. Importing it again, or reloading it,
changes nothing.
"""

import atexit
import os
import sys

import torch

from . import _compat

BACKEND_NAME = "foo"

# The self-test of the private torch API this module uses (the compiler's and distributed's are
# checked when they register): a torch that changed it fails here, naming what changed.
_compat.check("core")


def _check_privateuse1_is_free() -> None:
    current = _compat.resolve("core.privateuse1_backend_name")()
    if current not in ("privateuseone", BACKEND_NAME):
        raise RuntimeError(
            f"Cannot register the {BACKEND_NAME!r} backend: this process already renamed the "
            f"PrivateUse1 backend to {current!r}, and a process can host only one PrivateUse1 backend. "
            "Use separate processes (or environments) for the two backends."
        )


_check_privateuse1_is_free()

from . import _version  # noqa: E402

_version.load_extension()  # the C++ backend, refused if it was built against another torch
from . import _C  # noqa: E402  (loaded above)
from ._numerics import use_cpu_choices as _use_cpu_choices  # noqa: E402
from ._utils import _get_device_index  # noqa: E402,F401  torch.serialization looks it up here
from .amp import get_amp_supported_dtype, is_bf16_supported  # noqa: E402
from .device import (  # noqa: E402
    _is_in_bad_fork,  # noqa: F401  torch.manual_seed and DataLoader workers look it up here
    _lazy_init,  # noqa: F401  torch calls it before it creates the first device tensor
    can_device_access_peer,
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    init,
    is_available,
    is_initialized,
    is_tf32_supported,
    no_device_reason,
    set_device,
    synchronize,
)
from .graphs import (  # noqa: E402
    FooGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from .memory import (  # noqa: E402
    caching_allocator_alloc,
    caching_allocator_delete,
    empty_cache,
    get_allocator_backend,
    get_per_process_memory_fraction,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .monitoring import (  # noqa: E402
    clock_rate,
    device_memory_used,
    list_gpu_processes,
    memory_usage,
    power_draw,
    temperature,
    utilization,
)
from .ops import bias_gelu  # noqa: E402,F401  (ops.py registers fake kernels and autograd)
from .random import (  # noqa: E402
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import (  # noqa: E402
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    _sleep,  # noqa: F401  keeps the current stream busy, for tests
    current_stream,
    default_stream,
    get_stream_from_external,
    get_sync_debug_mode,
    set_stream,
    set_sync_debug_mode,
    stream,
)

OutOfMemoryError = torch.OutOfMemoryError  # what the allocator raises, under torch.cuda's name


def fallback_ops() -> list[str]:
    """Operators that ran on the CPU fallback in this process (no foo kernel), sorted.

    Porting aid: run a workload, then implement the listed operators natively. Set
    FOO_WARN_FALLBACK=1 to get a warning the first time each one runs.
    """
    return list(_C._fallback_ops())


def fallback_paths() -> dict[str, dict[str, int]]:
    """For each operator that ran on the CPU fallback: its calls on each path, ``{"sync": n, "async": m}``.

    "async" counts the calls the asynchronous fallback served (:func:`set_async_fallback`); "sync" the
    others, including those the asynchronous path cannot serve while it is on (data-dependent output
    shapes, results that are not tensors, random operators, ...).
    """
    return {name: {"sync": sync, "async": async_} for name, sync, async_ in _C._fallback_paths()}


def set_async_fallback(enabled: bool) -> None:
    """Turns the asynchronous CPU fallback on or off (off by default; FOO_ASYNC_FALLBACK=1 turns it on).

    When on, an operator without a foo kernel whose results' shapes follow from its
    arguments' sizes is queued on the current stream (copies to pinned memory, the CPU kernel on a
    host thread of the stream, copies back) and returns device tensors at once, without the host
    waiting. An error of the CPU kernel (an nll_loss target out of range) then surfaces at the next
    synchronisation, as a device-side assert does on CUDA, and the operator's outputs hold NaN (zero
    for integers). Operators it cannot serve run on the synchronous path; :func:`fallback_paths` says
    which path each took.
    """
    _C._set_async_fallback(bool(enabled))


def async_fallback_enabled() -> bool:
    """Whether the asynchronous CPU fallback is on (:func:`set_async_fallback`)."""
    return bool(_C._async_fallback_enabled())


def __getattr__(name: str):
    # torch.utils.checkpoint saves and restores the device's RNG state only when the device module's
    # `_initialized` is true (torch.cuda._initialized for CUDA): without it, dropout under activation
    # checkpointing would recompute with other random numbers.
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register() -> None:
    module = sys.modules[__name__]
    if _compat.resolve("core.privateuse1_backend_name")() != BACKEND_NAME:
        torch.utils.rename_privateuse1_backend(BACKEND_NAME)
    if getattr(torch, BACKEND_NAME, None) is not module:
        _compat.resolve("core.register_device_module")(BACKEND_NAME, module)
    if not hasattr(torch.Tensor, BACKEND_NAME):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
        _compat.let_submodules_hide_the_module_method(BACKEND_NAME)


_register()
_use_cpu_choices(BACKEND_NAME)

from . import compiler  # noqa: E402

compiler.install()  # torch.compile: the Dynamo interface and the Inductor backend, as they load
# Inductor (torch 2.15 on) calls it before its first compilation for the device (compiler.py).
_inductor_backend_init = compiler.inductor_backend_init

from . import distributed  # noqa: E402,F401  registers the c10d backend "fooccl" with torch.distributed


def _finish_device_work() -> None:
    """At interpreter exit, while Python still runs (C++ static destructors run after Python's
    atexit handlers): waits until torch's autograd thread of each device holds no backward pass (one
    that it drops during finalization aborts the process: csrc/python/AutogradThreads.cpp says why),
    then for the work still queued on the devices, while everything its kernels call into is alive."""
    if _is_in_bad_fork():
        return
    _C._set_sync_debug_mode(0)  # these waits are the backend's own, not the program's
    for index in range(device_count()):
        if _C._is_initialized(index):
            for finish in (_C._finish_autograd_device_thread, _C._synchronize):
                try:
                    finish(index)
                except RuntimeError:
                    pass  # a failed kernel: nothing is left to report it to at exit


atexit.register(_finish_device_work)

# Before os.fork() (multiprocessing, DataLoader workers): the asynchronous fallback's queued CPU kernels
# finish first. One running on a stream's worker at the fork may hold a lock of torch's that the child,
# which has no such thread, would wait on forever (the child cannot use the device; it can use the CPU).
os.register_at_fork(before=_C._wait_for_async_fallback)

__all__ = [
    "async_fallback_enabled",
    "BACKEND_NAME",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "can_device_access_peer",
    "clock_rate",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_memory_used",
    "device_of",
    "empty_cache",
    "Event",
    "ExternalStream",
    "fallback_ops",
    "fallback_paths",
    "FooGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
    "get_allocator_backend",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_per_process_memory_fraction",
    "get_rng_state",
    "get_rng_state_all",
    "get_stream_from_external",
    "get_sync_debug_mode",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "init",
    "initial_seed",
    "is_available",
    "no_device_reason",
    "is_bf16_supported",
    "is_initialized",
    "is_tf32_supported",
    "list_gpu_processes",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "memory_usage",
    "ops",
    "OutOfMemoryError",
    "power_draw",
    "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_async_fallback",
    "set_device",
    "set_per_process_memory_fraction",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "set_sync_debug_mode",
    "Stream",
    "stream",
    "StreamContext",
    "synchronize",
    "temperature",
    "utilization",
]

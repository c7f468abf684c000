"""The device interface TorchDynamo and Inductor use to drive foo devices.

``torch.compile`` does not call ``torch.foo`` directly: it asks
``torch._dynamo.device_interface`` for the interface registered under the device name. Dynamo uses
it to trace code that touches the device (``torch.foo.Stream``, ``Event``,
``torch.foo.stream(s)`` contexts, ``current_stream()``, device properties) into the
graph without graph breaks; Inductor uses it to query the device, synchronise, and (in its compile
workers, which must not touch the device) read device properties recorded in the main process.
Nothing registers an interface for a PrivateUse1 device: ``compiler.py`` registers this one as soon
as Dynamo is imported. Every entry forwards to the device module, so a hardware port changes nothing
here.
"""

import contextlib
from typing import Any

import torch

from . import _C, _compat, _inductor, _version, streams
from ._utils import _get_device_index
from .amp import is_bf16_supported
from .device import current_device, device_count, get_device_properties, is_available, set_device, synchronize
from .device import device as device_context
from .memory import memory_allocated

_DEVICE_TYPE = "foo"
DeviceInterface = _compat.resolve("dynamo.DeviceInterface")
caching_worker_current_devices = _compat.resolve("dynamo.caching_worker_current_devices")
caching_worker_device_properties = _compat.resolve("dynamo.caching_worker_device_properties")


class FooInterface(DeviceInterface):
    """``torch._dynamo.device_interface.get_interface_for_device("foo")``."""

    device = device_context
    # Dynamo traces only torch.Stream / torch.Event subclasses (it recognises them by type).
    Event = streams.Event
    Stream = streams.Stream

    class Worker:
        """Device queries that also work in Inductor's compile workers, which never initialise the
        device: properties are read once in the main process and cached for the workers."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices[_DEVICE_TYPE] = device

        @staticmethod
        def current_device() -> int:
            if _DEVICE_TYPE in caching_worker_current_devices:
                return caching_worker_current_devices[_DEVICE_TYPE]
            return _C._current_device()

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            if device is None:
                index = FooInterface.Worker.current_device()
            else:
                index = _get_device_index(device, optional=True)
            if _DEVICE_TYPE not in caching_worker_device_properties:
                caching_worker_device_properties[_DEVICE_TYPE] = [
                    torch.foo.get_device_properties(i) for i in range(_C._device_count())
                ]
            return caching_worker_device_properties[_DEVICE_TYPE][index]

    current_device = staticmethod(current_device)
    set_device = staticmethod(set_device)
    device_count = staticmethod(device_count)
    is_available = staticmethod(is_available)
    synchronize = staticmethod(synchronize)
    stream = staticmethod(streams.stream)
    current_stream = staticmethod(streams.current_stream)
    set_stream = staticmethod(streams.set_stream)
    memory_allocated = staticmethod(memory_allocated)
    is_bf16_supported = staticmethod(is_bf16_supported)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        streams.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def exchange_device(device: int) -> int:
        """Makes `device` current and returns the previous one (-1: change nothing, return -1)."""
        if device < 0:
            return -1
        return _C._exchange_device(device)

    # The same: setting a device initialises nothing on this runtime.
    maybe_exchange_device = exchange_device

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        """The runtime handle (fooStream_t) of the current stream of `device_idx`, as an
        integer (0 for a default stream, as for CUDA)."""
        return _C._current_raw_stream(device_idx)

    @staticmethod
    def get_compute_capability(device: Any = None) -> int:
        """Capability as one number (major * 10 + minor), the form Inductor puts in cache keys."""
        major, minor = torch.foo.get_device_capability(device)
        return major * 10 + minor

    @classmethod
    def get_cache_system_info(cls) -> dict[str, object]:
        """What Inductor's caches key on for this device (torch 2.15 on; 2.14 never asks): the code
        generator, the driver's scheduling (_inductor/), so that a build of the same name with the other
        driver never loads this one's compiled modules from the on-disk cache."""
        module, name = _inductor._SCHEDULING
        return {"scheduling": f"{module}.{name}"}

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        """False: the emulated device runs C++ kernels (see _inductor/); a chip with a Triton backend
        returns True here and registers a Triton scheduling instead."""
        return False


def register() -> None:
    """Registers the interface for "foo" and each "foo:N", and makes the device module traceable."""
    register_interface_for_device = _compat.resolve("dynamo.register_interface_for_device")
    register_interface_for_device(_DEVICE_TYPE, FooInterface)
    for index in range(_C._device_count()):
        register_interface_for_device(f"{_DEVICE_TYPE}:{index}", FooInterface)
    if not _traceable:
        _make_device_module_traceable()
        _traceable.append(True)


_traceable: list[bool] = []


def _make_device_module_traceable() -> None:
    """Lets Dynamo trace ``torch.foo.*`` without graph breaks.

    The device module's functions end in calls into the extension, which Dynamo cannot trace. Each
    gets a substitute Dynamo traces instead (``torch.compiler.substitute_in_graph``): either the
    device-generic ``torch.accelerator`` call Dynamo already understands (streams, synchronisation,
    the current device, guarded), or, for queries whose answer cannot change, the function itself,
    run once while tracing (``can_constant_fold_through``). ``Stream`` and ``Event`` are built in the
    graph like ``torch.Stream``: torch 2.15 does so for the ``Stream`` and ``Event`` of every registered
    device interface (the interface above names them); 2.14 keeps a fixed set of such classes
    (torch.Stream, torch.Event and CUDA's, XPU's and HPU's), to which ``_compat.trace_in_graph`` adds
    these two, and nothing else (touchpoint dynamo.in_graph_classes).
    """
    if not _version.at_least(2, 15):
        _compat.trace_in_graph(streams.Stream, streams.Event)
    substitute = torch.compiler.substitute_in_graph

    @substitute(streams.current_stream)
    def traced_current_stream(device: Any = None) -> torch.Stream:
        if device is None:
            return torch.accelerator.current_stream()
        return torch.accelerator.current_stream(_as_device(device))

    @substitute(streams.stream)
    def traced_stream(stream: torch.Stream | None) -> Any:
        return contextlib.nullcontext() if stream is None else stream

    @substitute(synchronize)
    def traced_synchronize(device: Any = None) -> None:
        if device is None:
            torch.accelerator.synchronize()
        else:
            torch.accelerator.synchronize(_as_device(device))

    @substitute(current_device)
    def traced_current_device() -> int:
        return torch.accelerator.current_device_index()

    for query in (device_count, is_available, get_device_properties):
        substitute(query, can_constant_fold_through=True)(_needs_constant_arguments(query))


def _as_device(device: Any) -> torch.device:
    return torch.device(_DEVICE_TYPE, device) if isinstance(device, int) else torch.device(device)


def _needs_constant_arguments(query: Any) -> Any:
    def traced(*args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"torch.compile: torch.{_DEVICE_TYPE}.{query.__name__} needs arguments known while tracing")

    return traced

"""Streams and events: ``torch.foo.Stream``, ``Event``, ``current_stream``, ``stream(...)`` and friends.

Work on a foo device runs asynchronously on streams, in order within each stream, as on CUDA.
Every thread has a current stream per device (the device's default stream until changed), and
kernels and copies go to the current stream of the tensor's device. A ``Stream`` here is a
``torch.Stream`` and an ``Event`` a ``torch.Event``, so ``torch.accelerator``, the autograd engine
and code written for ``torch.Stream(device=...)`` accept them; these subclasses only default the
device to the current foo device and add torch.cuda's conveniences.
"""

from typing import Any

import torch

from . import _C
from ._utils import _get_device_index

_DEVICE_TYPE = "foo"


def _check_stream(stream: Any) -> None:
    if not isinstance(stream, torch.Stream) or stream.device.type != _DEVICE_TYPE:
        raise TypeError(f"Expected a foo stream, got {stream!r}")


class Stream(torch.Stream):
    """A queue of work that runs in order on a foo device, asynchronously to the host.

    ``Stream(device=None, priority=0)``: the device defaults to the current one; a negative
    priority asks for a high-priority stream. As with CUDA, streams come from a pool per device and
    priority, so creating one is cheap, and they are never destroyed.
    ``Stream(stream_id=..., device_index=..., device_type=...)`` names an existing stream.
    """

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> "Stream":
        if kwargs:
            return super().__new__(cls, priority=priority, **kwargs)
        index = _get_device_index(device, optional=True)
        return super().__new__(cls, device=torch.device(_DEVICE_TYPE, index), priority=priority)

    @property
    def priority(self) -> int:
        """0 for a normal stream, -1 for a high-priority one."""
        return _C._stream_priority(self.stream_id, self.device_index)

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """(least, greatest) priority: (0, -1); lower numbers mean higher priority."""
        return 0, -1

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Records `event` (a new one if None) on this stream and returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    @property
    def native_handle(self) -> int:
        """The runtime's handle of this stream (fooStream_t) as an integer, as torch.cuda.Stream's
        cuda_stream: what C code that queues work on the stream takes (0: the default stream)."""
        return _C._native_stream(self.stream_id, self.device_index)

    def __repr__(self) -> str:
        return f"<torch.{_DEVICE_TYPE}.Stream device={self.device} stream_id={self.stream_id}>"


class ExternalStream(Stream):
    """A stream created outside PyTorch, by code that calls the foo runtime directly.

    ``ExternalStream(stream_ptr, device=None)``: `stream_ptr` is the runtime's handle (fooStream_t)
    as an integer; `device` is the device it belongs to (default: the current one). Work queued
    under ``torch.foo.stream(ext)`` goes to that stream. PyTorch does not own it: the stream must
    outlive its use here, as with torch.cuda.ExternalStream.
    """

    def __new__(cls, stream_ptr: int, device: Any = None, **kwargs: Any) -> "ExternalStream":
        if kwargs:
            raise TypeError(f"ExternalStream got unexpected arguments {sorted(kwargs)}")
        if isinstance(stream_ptr, bool) or not isinstance(stream_ptr, int) or stream_ptr < 0:
            raise TypeError(f"ExternalStream expects the stream's handle as a non-negative int, got {stream_ptr!r}")
        index = _get_device_index(device, optional=True)
        stream_id, device_index, device_type = _C._external_stream(stream_ptr, index)
        return torch.Stream.__new__(cls, stream_id=stream_id, device_index=device_index, device_type=device_type)

    def __repr__(self) -> str:
        return f"<torch.{_DEVICE_TYPE}.ExternalStream device={self.device} handle={self.native_handle:#x}>"


def get_stream_from_external(data_ptr: int, device: Any = None) -> Stream:
    """An ExternalStream for the runtime stream handle `data_ptr` of `device` (default: current)."""
    return ExternalStream(data_ptr, device)


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Reports operations that make the host wait for the device, as torch.cuda.set_sync_debug_mode:
    "default" (0) says nothing, "warn" (1) warns, "error" (2) raises RuntimeError. They are the
    blocking copies between host and device (tensor.cpu(), .item(), .tolist(), printing a tensor,
    operators that run on the CPU fallback), stream and device synchronisation; device work and
    non-blocking copies to pinned memory are not reported."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    _C._set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    """The mode set by set_sync_debug_mode: 0, 1 or 2."""
    return _C._sync_debug_mode()


class Event(torch.Event):
    """A point in a stream: query it, wait for it on the host or another stream, time work with it.

    ``Event(enable_timing=False, blocking=False, interprocess=False, external=False)``. Timing must be
    enabled for ``elapsed_time``; without it, recording is cheaper. ``blocking`` is accepted for
    compatibility (waiting threads sleep anyway); interprocess and external (graph) events are not
    supported.
    """

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, external: bool = False
    ) -> "Event":
        if interprocess:
            raise NotImplementedError("foo events cannot be shared between processes")
        if external:
            raise NotImplementedError("foo has no graph capture, which external events are recorded in")
        return super().__new__(cls, device=torch.device(_DEVICE_TYPE), enable_timing=enable_timing, blocking=blocking)

    def record(self, stream: torch.Stream | None = None) -> None:
        """Records the event on `stream` (default: the current stream of the current device)."""
        super().record(current_stream() if stream is None else stream)

    def wait(self, stream: torch.Stream | None = None) -> None:
        """Makes `stream` (default: the current one) wait for the event before its later work."""
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds from this event to `end_event`; both need enable_timing=True, a record, and
        to have completed."""
        return _C._elapsed_time(self, end_event)

    def __repr__(self) -> str:
        return f"<torch.{_DEVICE_TYPE}.Event device={self.device} event_id={self.event_id:#x}>"


def _stream(stream_id: int, device_index: int, device_type: int) -> Stream:
    return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def current_stream(device: Any = None) -> Stream:
    """The current stream of this thread on `device` (default: the current device)."""
    return _stream(*_C._current_stream(_get_device_index(device, optional=True)))


def default_stream(device: Any = None) -> Stream:
    """The default stream of `device` (default: the current device)."""
    return _stream(*_C._default_stream(_get_device_index(device, optional=True)))


def set_stream(stream: torch.Stream | None) -> None:
    """Makes `stream` the current stream of its device for this thread, and its device the
    current device (as torch.cuda.set_stream does). None changes nothing."""
    if stream is None:
        return
    _check_stream(stream)
    _C._set_device(stream.device_index)
    _C._exchange_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """Context manager that makes a stream (and its device) current, and restores both on exit."""

    def __init__(self, stream: torch.Stream | None):
        if stream is not None:
            _check_stream(stream)
        self.stream = stream
        self._previous_device = -1
        self._previous_stream: tuple[int, int, int] | None = None

    def __enter__(self) -> torch.Stream | None:
        if self.stream is not None:
            self._previous_device = _C._current_device()
            self._previous_stream = _C._exchange_stream(self.stream.stream_id, self.stream.device_index)
            _C._set_device(self.stream.device_index)
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self._previous_stream is not None:
            stream_id, device_index, _ = self._previous_stream
            _C._exchange_stream(stream_id, device_index)
            _C._set_device(self._previous_device)
            self._previous_stream = None


def stream(stream: torch.Stream | None) -> StreamContext:
    """``with torch.foo.stream(s):`` runs the block's device work on `s` (None: no change)."""
    return StreamContext(stream)


def _sleep(microseconds: int) -> None:
    """Keeps the current stream busy for `microseconds` (for tests and benchmarks of asynchrony)."""
    _C._sleep(microseconds)

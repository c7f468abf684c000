"""Device management: the functions torch calls on ``torch.foo`` and users call directly.

torch reads ``is_available``, ``device_count`` and ``current_device`` (torch.utils.backend_registration,
torch.distributed.run), uses ``device`` as a context manager (torch.serialization restores tensors
inside it) and ``synchronize``. They mirror torch.cuda's functions of the same names.
"""

import ctypes
import os
import warnings
from typing import Any, NamedTuple

import torch

from . import _C
from ._utils import _get_device_index


def is_available() -> bool:
    """True if at least one foo device exists. Initialises nothing. Without one, warns
    why (no_device_reason), as torch.cuda.is_available() does."""
    if _C._device_count() > 0:
        return True
    warnings.warn(f"foo is not available: {no_device_reason()}", stacklevel=2)
    return False


def no_device_reason() -> str:
    """Why there is no foo device ("" when there is one): what the driver says where it says
    (the OpenCL driver: no ICD loader, no platform, no device, or a choice that matches none, with
    the package to install), else the setting that hid them."""
    if _C._device_count() > 0:
        return ""
    # The OpenCL driver's account, exported by the runtime linked into the module.
    says = getattr(ctypes.CDLL(_C.__file__), "fooOpenCLNoDeviceReason", None)
    if says is not None:
        says.restype = ctypes.c_char_p
        return says().decode(errors="replace")
    if os.environ.get("FOO_DEVICE_COUNT") == "0":
        return "FOO_DEVICE_COUNT=0"
    return "the driver found no device"


def device_count() -> int:
    """Number of foo devices (FOO_DEVICE_COUNT overrides the emulated default of 2)."""
    return _C._device_count()


def current_device() -> int:
    """Index of the current foo device of this thread."""
    return _C._current_device()


def set_device(device: Any) -> None:
    """Makes `device` (int, "foo:N" or torch.device) current for this thread."""
    _C._set_device(_get_device_index(device))


def synchronize(device: Any = None) -> None:
    """Waits for all work queued on `device` (default: the current device) to finish."""
    _C._synchronize(_get_device_index(device, optional=True))


def init() -> None:
    """Initialises the foo runtime and the current device now, as ``torch.cuda.init()`` does for CUDA.

    Ordinary code never needs it: the first foo tensor initialises the runtime. Call it to
    initialise at a time of your choosing (before forking workers that must not use the device, say).
    Does nothing once initialised. In a process forked after initialisation it raises RuntimeError
    with PyTorch's wording, "Cannot re-initialize foo in forked subprocess. ...".
    """
    _C._init()


def _lazy_init() -> None:
    """torch calls ``torch.foo._lazy_init()``, when it exists, before the first foo tensor a
    Python call creates (torch.ones(..., device="foo"), tensor.to("foo")), as it calls
    ``torch.cuda._lazy_init()``."""
    _C._init()


def _is_in_bad_fork() -> bool:
    """True in a child process forked after the foo runtime was initialised in its parent.

    Such a child cannot use foo devices (the runtime's worker threads do not survive fork;
    every call raises RuntimeError("Cannot re-initialize foo in forked subprocess. ..."), CUDA's
    wording, which says to use the 'spawn' start method). torch.manual_seed and the
    DataLoader's workers check it before they touch the device.
    """
    return _C._is_in_bad_fork()


def is_initialized() -> bool:
    """True once any foo device has been used (memory allocated or work launched)."""
    return not _is_in_bad_fork() and any(_C._is_initialized(i) for i in range(device_count()))


class device:
    """Context manager that makes a device current, and restores the previous one on exit.

    ``torch.foo.device(1)``, ``torch.foo.device("foo:1")``; None or -1 leaves the device unchanged.
    """

    def __init__(self, device: Any):
        self.idx = -1 if device is None or device == -1 else _get_device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self) -> "device":
        if self.idx != -1:
            self.prev_idx = _C._exchange_device(self.idx)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.idx != -1:
            _C._exchange_device(self.prev_idx)


class device_of(device):
    """Context manager that makes the device of tensor `obj` current (no-op for other devices)."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "foo" else -1)


class DeviceProperties(NamedTuple):
    name: str
    total_memory: int
    multi_processor_count: int
    major: int
    minor: int
    max_threads_per_block: int
    shared_memory_per_block: int
    host_accesses_device_memory: bool  # host code may read and write device memory through device pointers


def get_device_properties(device: Any = None) -> DeviceProperties:
    """Name, memory capacity in bytes, compute units, capability and launch limits of a device."""
    return DeviceProperties(**_C._device_properties(_get_device_index(device, optional=True)))


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    props = get_device_properties(device)
    return props.major, props.minor


def can_device_access_peer(device: Any, peer_device: Any) -> bool:
    """True if kernels and copies on `device` can address the memory of `peer_device` directly (the
    runtime's fooDeviceCanAccessPeer); False for the device itself, as torch.cuda answers."""
    return _C._can_access_peer(_get_device_index(device, optional=True), _get_device_index(peer_device))


def is_tf32_supported() -> bool:
    """False: the operator library computes float32 matrix products in float32, it has no TF32-like
    reduced-precision mode for torch.set_float32_matmul_precision to select."""
    return False

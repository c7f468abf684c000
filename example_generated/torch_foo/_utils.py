"""Device-index parsing shared by the device module and torch.serialization."""

from typing import Any

import torch

from . import _C


def _get_device_index(device: Any, optional: bool = False) -> int:
    """Returns the foo device index that `device` names.

    Accepts an int, a string ("foo", "foo:1"), a torch.device, or None. A device without an
    index (and None when `optional` is true) means the current device. torch.serialization calls
    this as ``torch.foo._utils._get_device_index(location, True)``.
    """
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "foo":
            raise ValueError(f"Expected a foo device, got {device}")
        device = device.index
    if device is None:
        if not optional:
            raise ValueError("Expected a foo device index, got None")
        return _C._current_device()
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"Expected a foo device index (int, str or torch.device), got {device!r}")
    return device

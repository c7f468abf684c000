"""Automatic mixed precision: what ``torch.autocast("foo")`` asks the device module.

``torch.autocast`` calls :func:`get_amp_supported_dtype` when it is entered for this device: a
dtype outside the list makes it warn and run without autocast, as torch does for other devices.
The casting policy itself is C++ (csrc/aten/Autocast.cpp); ``torch.amp.GradScaler("foo")``
needs nothing here (its two operators are native kernels, csrc/aten/AmpKernels.cpp).
"""

import torch


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The lower-precision dtypes autocast may use on foo devices."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """True: foo devices compute in bfloat16."""
    return True

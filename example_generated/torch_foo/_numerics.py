"""Python-level algorithm choices that PyTorch makes by device type, taken as the CPU's.

Some of PyTorch's Python code picks an algorithm or an accumulation dtype from a table keyed by
``device.type``, with entries for "cpu" and "cuda" and a generic default for any other device. The
foo device computes with the CPU's kernels (the emulated device's math library is ATen's CPU
code), so the generic default would give it other numerics than the CPU for the same kernels: in
bfloat16, ``F.linear_cross_entropy(..., options=LinearCrossEntropyOptions())`` would accumulate in
bfloat16 instead of float32, and its results would differ from the CPU's beyond OpInfo's tolerances.

A device with its own math library chooses here what suits its kernels (CUDA's entries are the
example), or removes a choice to get PyTorch's generic default.
"""

import importlib.util
import sys
import warnings

import torch

from . import _compat


def _linear_cross_entropy_like_cpu(name: str) -> None:
    """F.linear_cross_entropy's chunked path: the CPU's "auto" accumulation policy and dtype (private
    torch API: touchpoints numerics.* in _compat.py; the replacement answers as for the CPU only for
    device type `name` and calls torch's own function for every other device)."""
    if importlib.util.find_spec(_compat.touchpoint("numerics.linear_cross_entropy_resolve").module) is None:
        return  # a torch without the chunked linear_cross_entropy: nothing to adapt
    try:
        _compat.check("numerics")
    except _compat.TorchCompatError as error:
        warnings.warn(f"{error}\n{name} devices keep PyTorch's generic linear_cross_entropy choices.", stacklevel=3)
        return
    resolve = _compat.resolve("numerics.linear_cross_entropy_resolve")
    options = _compat.owner("numerics.linear_cross_entropy_resolve")
    if getattr(resolve, "_torch_foo_as_cpu", False):
        return
    # The policy is chosen in a function of the device type, called by its module-level name.
    policy = _compat.resolve("numerics.linear_cross_entropy_policy")
    where = _compat.touchpoint("numerics.linear_cross_entropy_policy")

    def policy_as_cpu(device_type: str | None, dtype: torch.dtype) -> str:
        return policy("cpu" if device_type == name else device_type, dtype)

    policy_as_cpu.__wrapped__ = policy
    setattr(sys.modules[where.module], where.attribute, policy_as_cpu)

    def resolve_as_cpu(dtype: torch.dtype, device: torch.device | None) -> torch.dtype | None:
        if device is not None and device.type == name:
            device = torch.device("cpu")
        return resolve(dtype, device)

    resolve_as_cpu._torch_foo_as_cpu = True
    options._resolve_auto_acc_dtype = staticmethod(resolve_as_cpu)


def use_cpu_choices(name: str) -> None:
    """Gives device type `name` the CPU's entries in PyTorch's per-device algorithm tables."""
    _linear_cross_entropy_like_cpu(name)

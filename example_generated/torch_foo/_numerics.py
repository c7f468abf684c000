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
import warnings

from . import _compat


def _linear_cross_entropy_like_cpu(name: str) -> None:
    """F.linear_cross_entropy's chunked path: the CPU's "auto" accumulation policy and dtype (private
    torch API, replaced for device type `name` only by _compat.linear_cross_entropy_as_cpu)."""
    if importlib.util.find_spec(_compat.touchpoint("numerics.linear_cross_entropy_resolve").module) is None:
        return  # a torch without the chunked linear_cross_entropy: nothing to adapt
    try:
        _compat.linear_cross_entropy_as_cpu(name)
    except _compat.TorchCompatError as error:
        warnings.warn(f"{error}\n{name} devices keep PyTorch's generic linear_cross_entropy choices.", stacklevel=3)


def use_cpu_choices(name: str) -> None:
    """Gives device type `name` the CPU's entries in PyTorch's per-device algorithm tables."""
    _linear_cross_entropy_like_cpu(name)

"""Custom operators of the foo backend: ``torch.ops.torch_foo.*``.

The schemas and the foo and CPU kernels are C++ (csrc/custom_ops/CustomOps.cpp), built on PyTorch's
stable ABI into a library of their own, ``_custom_ops.so`` beside the extension, which this module loads
(one binary for every supported torch release; its device kernels run in the extension's runtime).
This module adds what PyTorch needs from Python: a fake kernel for each operator (output metadata
without data, for FakeTensor, torch.compile and torch.export) and the autograd formula of
``bias_gelu``. Add your own operators the same way: schema and kernels in C++, fake kernel and
autograd here, a ``torch.library.opcheck`` test in tests/test_custom_ops.py.

    >>> x = torch.randn(4, 8, device="foo", requires_grad=True)
    >>> y = torch.ops.torch_foo.bias_gelu(x, torch.zeros(8, device="foo"))
"""

from pathlib import Path

import torch

from . import _C  # noqa: F401  first: the operators' library calls the extension's operator library

NAMESPACE = "torch_foo"
# The custom operator library (csrc/custom_ops/CMakeLists.txt): it defines the operators.
LIBRARY = Path(__file__).with_name("_custom_ops.so")


def _load_library() -> None:
    if not LIBRARY.is_file():
        raise ImportError(
            f"{LIBRARY} is missing: the custom operators are built with the extension "
            "(pip install --no-build-isolation -e . in the project)"
        )
    torch.ops.load_library(str(LIBRARY))


_load_library()


def _check_inputs(x: torch.Tensor, bias: torch.Tensor) -> None:
    torch._check(x.dim() >= 1, lambda: "bias_gelu: x must have at least one dimension")
    torch._check(
        bias.dim() == 1 and bias.shape[0] == x.shape[-1],
        lambda: f"bias_gelu: bias must be a vector of size x.size(-1) = {x.shape[-1]}, got shape {tuple(bias.shape)}",
    )
    torch._check(x.dtype.is_floating_point, lambda: f"bias_gelu: x must have a floating point dtype, got {x.dtype}")
    torch._check(x.dtype == bias.dtype, lambda: "bias_gelu: x and bias must have one dtype")
    torch._check(x.device == bias.device, lambda: "bias_gelu: x and bias must be on one device")


@torch.library.register_fake(f"{NAMESPACE}::bias_gelu")
def _bias_gelu_fake(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    _check_inputs(x, bias)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake(f"{NAMESPACE}::bias_gelu_backward")
def _bias_gelu_backward_fake(grad: torch.Tensor, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    _check_inputs(x, bias)
    torch._check(grad.shape == x.shape, lambda: "bias_gelu_backward: grad must have the shape of x")
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output) -> None:
    x, bias = inputs
    ctx.save_for_backward(x, bias)


def _bias_gelu_backward(ctx, grad: torch.Tensor):
    x, bias = ctx.saved_tensors
    grad_x = torch.ops.torch_foo.bias_gelu_backward(grad, x, bias)
    grad_bias = grad_x.reshape(-1, bias.shape[0]).sum(0) if ctx.needs_input_grad[1] else None
    return (grad_x if ctx.needs_input_grad[0] else None), grad_bias


torch.library.register_autograd(f"{NAMESPACE}::bias_gelu", _bias_gelu_backward, setup_context=_setup_context)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """gelu(x + bias), bias broadcast along the last dimension, in one kernel."""
    return torch.ops.torch_foo.bias_gelu(x, bias)

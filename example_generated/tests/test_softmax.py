"""Softmax and log-softmax and their gradients on the device (csrc/aten/Softmax.cpp): F.softmax,
F.log_softmax and the log-softmax of F.cross_entropy run in the operator library
(fooOpSoftmax, fooOpSoftmaxBackward) instead of copying the logits to the CPU and back. The
results are the CPU's bit for bit on the emulated device, which computes them with PyTorch's CPU
kernels (csrc/kernels/emulated/host_math.cpp), whose exponentials and logarithms come from vector
math libraries that a hand-written loop would not match to the last bit; on another driver (OpenCL:
its own kernels, exp and log) within the driver's numerics profile (tests/numerics.py)."""

import pytest
import torch
import torch.nn.functional as F
from numerics import assert_matches_cpu

FLOATING = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
FUNCTIONS = {"softmax": F.softmax, "log_softmax": F.log_softmax}


def logits(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 4).to(dtype)


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("name", list(FUNCTIONS))
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_forward_and_backward_equal_the_cpus(device, name, dtype, dim):
    function = FUNCTIONS[name]
    x = logits((5, 37, 3), dtype)
    weights = logits((5, 37, 3), dtype, seed=1)
    results = []
    for where in ("cpu", device):
        leaf = x.to(where).detach().requires_grad_()
        out = function(leaf, dim=dim)
        (out * weights.to(where)).sum().backward()
        results.append((out.detach().cpu(), leaf.grad.cpu()))
    (expected, expected_grad), (got, got_grad) = results
    # Bit for bit on the emulated device; on a driver whose exp and log are its own (OpenCL), as
    # accurate as the CPU against float64 (tests/numerics.py): the forward against the float64
    # forward, each side's gradient against the float64 gradient of its own forward output (a
    # 16-bit output one unit off the CPU's moves the gradient of the other elements).
    backward = torch.ops.aten._softmax_backward_data if name == "softmax" else torch.ops.aten._log_softmax_backward_data

    def exact_grad(output):
        return backward(weights.double(), output.double(), dim, torch.float64)

    assert_matches_cpu(got, expected, reference=function(x.double(), dim=dim))
    assert_matches_cpu(got_grad, expected_grad, reference=exact_grad(got), cpu_reference=exact_grad(expected))


def test_views_scalars_and_empty_tensors(device):
    x = logits((6, 8), torch.float32)
    cases = {
        "transposed": lambda t: F.log_softmax(t.t(), dim=1),
        "every other column": lambda t: F.softmax(t[:, ::2], dim=0),
        "a number": lambda t: F.log_softmax(t[0, 0], dim=0),
        "empty": lambda t: F.softmax(t[:0], dim=1),
        "an empty dimension": lambda t: F.log_softmax(t[:, :0], dim=1),
        "infinities": lambda t: F.log_softmax(torch.where(t > 1, float("-inf"), t), dim=1),
        "dtype= (on the fallback)": lambda t: F.log_softmax(t.half(), dim=1, dtype=torch.float32),
        "integers (on the fallback)": lambda t: torch.special.log_softmax(t.long(), dim=1, dtype=torch.float64),
    }
    for name, case in cases.items():
        got, expected = case(x.to(device)), case(x)
        assert got.device == device, name
        assert got.shape == expected.shape and got.dtype == expected.dtype, name
        assert_matches_cpu(got, expected)


def test_a_bad_dimension_raises_the_cpus_error(device):
    with pytest.raises(IndexError) as on_cpu:
        F.softmax(torch.ones(2, 3), dim=2)
    with pytest.raises(IndexError) as on_device:
        F.softmax(torch.ones(2, 3, device=device), dim=2)
    assert str(on_device.value) == str(on_cpu.value)


def test_cross_entropy_runs_its_softmax_on_the_device(run_python):
    # A new interpreter: the fallback's record is per process.
    code = (
        "import torch, torch.nn.functional as F, torch_foo\n"
        "x = torch.randn(4, 10, device='foo', requires_grad=True)\n"
        "F.cross_entropy(x, torch.tensor([1, 0, 9, 3], device='foo')).backward()\n"
        "F.softmax(x, dim=0).sum().backward()\n"
        "print(torch_foo.fallback_ops())\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    on_fallback = {op.split("::")[1].split(".")[0] for op in eval(result.stdout)}
    native = {"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data"}
    assert not on_fallback & native, on_fallback

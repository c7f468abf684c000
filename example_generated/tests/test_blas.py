"""Matrix products (csrc/aten/Blas.cpp): mm, addmm, bmm, baddbmm and what reaches them (matmul,
nn.Linear and their gradients) run on the device and equal the CPU's results.

Results are compared through the driver's numerics profile (tests/numerics.py): the emulated device
multiplies with the host's BLAS (csrc/kernels/emulated/host_math.cpp), so its results are the CPU's
bit for bit; OpenCL's CLBlast sums in another order (a tiled product), so its results are the CPU's
within the profile's tolerance for the dtype."""

import pytest
import torch
import torch.nn.functional as F
from numerics import assert_matches_cpu
from torch.testing import assert_close

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.complex128]
PRODUCTS = {
    "mm": lambda a, b, bias, bb: torch.mm(a, b),
    "addmm": lambda a, b, bias, bb: torch.addmm(bias, a, b),
    "addmm_factors": lambda a, b, bias, bb: torch.addmm(bias, a, b, beta=0.5, alpha=-2),
    "addmm_matrix_bias": lambda a, b, bias, bb: torch.addmm(a @ b, a, b, beta=2),
    "bmm": lambda a, b, bias, bb: torch.bmm(*bb),
    "baddbmm": lambda a, b, bias, bb: torch.baddbmm(bias, *bb, beta=1.5, alpha=0.5),
    "matmul_batched": lambda a, b, bias, bb: bb[0] @ b,
    "matmul_vector": lambda a, b, bias, bb: a @ b[:, 0],
    "linear": lambda a, b, bias, bb: F.linear(a, b.t(), bias),
    "transposed": lambda a, b, bias, bb: torch.mm(b.t(), a.t()),
}


def operands(dtype, device="cpu"):
    g = torch.Generator().manual_seed(0)
    a, b, bias = (torch.randn(shape, generator=g, dtype=torch.float64) for shape in ((6, 5), (5, 4), (4,)))
    batches = tuple(torch.randn(shape, generator=g, dtype=torch.float64) for shape in ((3, 6, 5), (3, 5, 4)))
    return tuple(t.to(dtype).to(device) for t in (a, b, bias)) + (tuple(t.to(dtype).to(device) for t in batches),)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(PRODUCTS))
def test_products_equal_the_cpus(device, name, dtype):
    expected = PRODUCTS[name](*operands(dtype))
    got = PRODUCTS[name](*operands(dtype, device))
    assert got.device == device
    assert_matches_cpu(got, expected)


def test_conjugate_and_negative_views(device):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(4, 4, generator=g, dtype=torch.complex64)
    b = torch.randn(4, 4, generator=g, dtype=torch.complex64)
    views = {
        "conjugate": lambda x, y: x.conj() @ y,
        "conjugate transpose": lambda x, y: x @ y.conj().t(),
        "negative": lambda x, y: x._neg_view() @ y,
    }
    for name, product in views.items():
        got = product(a.to(device), b.to(device))
        assert got.device == device, name
        assert_matches_cpu(got, product(a, b))


def test_edge_cases_follow_the_cpu(device):
    nan_bias = torch.full((3,), float("nan"))
    a, b = torch.randn(2, 5), torch.randn(5, 3)
    cases = {
        "beta 0 ignores the bias, NaN included": lambda d: torch.addmm(nan_bias.to(d), a.to(d), b.to(d), beta=0),
        "an empty sum gives beta * bias": lambda d: torch.addmm(
            torch.ones(2, 3, device=d), torch.ones(2, 0, device=d), torch.ones(0, 3, device=d), beta=3
        ),
        "an empty sum without bias is zero": lambda d: torch.mm(torch.ones(2, 0, device=d), torch.ones(0, 3, device=d)),
        "an empty result": lambda d: torch.bmm(torch.ones(0, 2, 5, device=d), torch.ones(0, 5, 3, device=d)),
        "integers (on the CPU fallback)": lambda d: torch.mm(
            torch.arange(6, device=d).view(2, 3), torch.arange(6, device=d).view(3, 2)
        ),
        "out=": lambda d: torch.mm(a.to(d), b.to(d), out=torch.empty(2, 3, device=d)),
        "out= resized": lambda d: torch.addmm(
            torch.ones(3, device=d), a.to(d), b.to(d), beta=2, out=torch.empty(0, device=d)
        ),
        "in place": lambda d: torch.ones(2, 3, device=d).addmm_(a.to(d), b.to(d), alpha=2),
    }
    for name, case in cases.items():
        got, expected = case(device), case("cpu")
        assert got.device == device, name
        assert_matches_cpu(got, expected)


def test_linear_gradients_equal_the_cpus(device):
    torch.manual_seed(0)
    layer = torch.nn.Linear(5, 3)
    x = torch.randn(4, 2, 5)
    moved = torch.nn.Linear(5, 3).to(device)
    moved.load_state_dict(layer.state_dict())
    layer(x).square().sum().backward()
    moved(x.to(device)).square().sum().backward()
    assert_matches_cpu(moved.weight.grad, layer.weight.grad)
    # The bias's gradient is a sum over the batch (tests/test_pointwise.py): within a rounding.
    assert_close(moved.bias.grad.cpu(), layer.bias.grad)


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.mm(torch.ones(2, 3, device=d), torch.ones(2, 3, device=d)),
        lambda d: torch.mm(torch.ones(2, 3, device=d), torch.ones(3, 2, device=d, dtype=torch.float64)),
        lambda d: torch.mm(torch.ones(2, 3, 1, device=d), torch.ones(3, 2, device=d)),
        lambda d: torch.addmm(torch.ones(4, device=d), torch.ones(2, 3, device=d), torch.ones(3, 5, device=d)),
        lambda d: torch.bmm(torch.ones(2, 2, 3, device=d), torch.ones(3, 3, 2, device=d)),
        lambda d: torch.baddbmm(torch.ones(2, device=d), torch.ones(1, 2, 3, device=d), torch.ones(1, 3, 4, device=d)),
        lambda d: torch.addmm(
            torch.ones(2, 2, device=d, dtype=torch.float64), torch.ones(2, 3, device=d), torch.ones(3, 2, device=d)
        ),
        lambda d: torch.bmm(torch.ones(2, 2, 3, device=d), torch.ones(2, 3, 2, device=d, dtype=torch.float64)),
        lambda d: torch.baddbmm(
            torch.ones(2, 2, 2, device=d, dtype=torch.float64),
            torch.ones(2, 2, 3, device=d),
            torch.ones(2, 3, 2, device=d),
        ),
        lambda d: torch.bmm(torch.ones(2, 3, device=d), torch.ones(2, 3, 2, device=d)),
        lambda d: torch.bmm(
            torch.ones(1, 2, 3, device=d), torch.ones(1, 3, 2, device=d), out=torch.empty(1, 2, 2, device=d).double()
        ),
    ],
    ids=[
        "shapes",
        "dtypes",
        "not_a_matrix",
        "bias_shape",
        "batches",
        "batched_bias_shape",
        "bias_dtype",
        "batched_dtypes",
        "batched_bias_dtype",
        "not_a_batch",
        "out_dtype",
    ],
)
def test_errors_match_the_cpus(device, case):
    with pytest.raises(RuntimeError) as on_cpu:
        case("cpu")
    with pytest.raises(RuntimeError) as on_device:
        case(device)
    assert str(on_device.value).split("\n")[0].lower() == str(on_cpu.value).split("\n")[0].lower()


def test_products_run_on_the_device(run_python):
    # A new interpreter: the fallback's record is per process.
    code = (
        "import torch, torch_foo\n"
        "layer = torch.nn.Linear(8, 4).to('foo')\n"
        "x = torch.randn(3, 8, device='foo', requires_grad=True)\n"
        "layer(x).sum().backward()\n"
        "b = torch.randn(2, 8, 8, device='foo')\n"
        "torch.baddbmm(b, b, b); b @ b\n"
        "torch.bmm(b, b, out=torch.empty_like(b)); torch.mm(b[0], b[0], out=torch.empty_like(b[0]))\n"
        "torch.addmm(b[0], b[0], b[0], out=torch.empty_like(b[0])); torch.baddbmm(b, b, b, out=torch.empty_like(b))\n"
        "print(torch_foo.fallback_ops())\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    on_fallback = {op.split("::")[1].split(".")[0] for op in eval(result.stdout)}
    assert not on_fallback & {"mm", "addmm", "bmm", "baddbmm"}, on_fallback

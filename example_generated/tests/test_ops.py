"""Native kernels (add, sub, mul, div, fill_) and the CPU fallback, compared with CPU results."""

import threading

import pytest
import torch
from numerics import assert_matches_cpu
from torch.testing import assert_close

BINARY = {
    "add": lambda a, b, **kw: torch.add(a, b, **kw),
    "add_alpha": lambda a, b, **kw: torch.add(a, b, alpha=2, **kw),
    "sub": lambda a, b, **kw: torch.sub(a, b, **kw),
    "sub_alpha": lambda a, b, **kw: torch.sub(a, b, alpha=3, **kw),
    "mul": lambda a, b, **kw: torch.mul(a, b, **kw),
    "div": lambda a, b, **kw: torch.div(a, b, **kw),
}
DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.complex64,
    torch.complex128,
]


# CPU computes reduced-precision arithmetic with or without fused multiply-add depending on the
# memory layout, so results may differ by one unit in the last place of the operands.
TOLERANCE = {torch.float16: {"atol": 0.02, "rtol": 2e-3}, torch.bfloat16: {"atol": 0.2, "rtol": 2e-2}}


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.randn(shape, generator=g) * 4).to(dtype) + (0.5 if not dtype.is_complex else 0.5 + 0.5j)
    values = torch.randint(1, 9, shape, generator=g)
    return values.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_ops_match_cpu(device, op, dtype):
    fn = BINARY[op]
    tol = TOLERANCE.get(dtype, {})
    a, b = make((5, 7), dtype, 0), make((5, 7), dtype, 1)
    expected = fn(a, b)
    assert_close(fn(a.to(device), b.to(device)).cpu(), expected, **tol)
    # broadcasting and non-contiguous operands
    assert_close(fn(a.to(device).t(), b[:, :1].to(device).t()).cpu(), fn(a.t(), b[:, :1].t()), **tol)
    # Python number and 0-dim host tensor operands
    assert_close(fn(a.to(device), 3).cpu(), fn(a, 3), **tol)
    assert_close(fn(a.to(device), torch.tensor(2)).cpu(), fn(a, torch.tensor(2)), **tol)
    two = torch.tensor(2).to(dtype)
    assert_close(fn(two, b.to(device)).cpu(), fn(two, b), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_add_with_alpha_rounds_once_as_the_cpu(device, dtype):
    """a + alpha * b is one fused multiply-add (an optimizer's p.add_(g, alpha=-lr)), on the
    processor's vector instructions where it has them: bit for bit the CPU's result, on every
    driver (an elementary operation of tests/numerics.py)."""
    a, b = make((4099,), dtype, 0), make((4099,), dtype, 1)
    assert_matches_cpu(torch.add(a.to(device), b.to(device), alpha=-0.1), torch.add(a, b, alpha=-0.1), elementary=True)
    on_device = a.to(device)
    on_device.add_(b.to(device), alpha=0.3)
    assert_matches_cpu(on_device, a.add(b, alpha=0.3), elementary=True)


def test_float_division_is_exact_where_the_device_promises_it(device):
    # Quotients of random floats, many of them inexact, where an approximate division is off by an ulp.
    g = torch.Generator().manual_seed(7)
    a, b = torch.randn(1 << 16, generator=g), torch.randn(1 << 16, generator=g)
    assert_matches_cpu(a.to(device) / b.to(device), a / b, elementary=True, division=True)
    assert_matches_cpu(a.to(device) / 3.0, a / 3.0, elementary=True, division=True)


def test_bool_arithmetic(device):
    a = torch.tensor([True, False, True, False])
    b = torch.tensor([True, True, False, False])
    assert_close((a.to(device) + b.to(device)).cpu(), a + b)
    assert_close((a.to(device) * b.to(device)).cpu(), a * b)
    assert_close((a.to(device) / b.to(device)).cpu(), a / b, equal_nan=True)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
        a.to(device) - b.to(device)


@pytest.mark.parametrize(
    "lhs,rhs",
    [
        (torch.int32, torch.float32),
        (torch.uint8, torch.int8),
        (torch.float16, torch.float64),
        (torch.int64, torch.bool),
        (torch.bfloat16, torch.float16),
        (torch.float32, torch.complex64),
    ],
    ids=str,
)
@pytest.mark.parametrize("op", ["add", "mul", "div", "sub"])
def test_type_promotion_matches_cpu(device, op, lhs, rhs):
    fn = BINARY[op]
    a, b = make((6,), lhs, 2), make((6,), rhs, 3)
    if op == "sub" and rhs == torch.bool:
        pytest.skip("sub with a bool tensor is an error on every device")
    expected = fn(a, b)
    result = fn(a.to(device), b.to(device))
    assert result.dtype == expected.dtype
    assert_close(result.cpu(), expected)
    assert fn(a.to(device), 1.5).dtype == fn(a, 1.5).dtype


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_out_and_in_place_variants(device, op):
    a, b = make((4, 5), torch.float32, 4), make((5,), torch.float32, 5)
    out = torch.empty(4, 5, device=device)
    returned = BINARY[op](a.to(device), b.to(device), out=out)
    assert returned is out
    assert_close(out.cpu(), BINARY[op](a, b))
    resized = torch.empty(0, device=device)
    BINARY[op](a.to(device), b.to(device), out=resized)
    assert resized.shape == (4, 5)
    assert_close(resized.cpu(), BINARY[op](a, b))
    double_out = torch.empty(4, 5, device=device, dtype=torch.float64)
    BINARY[op](a.to(device), b.to(device), out=double_out)  # computed in float32, stored as float64
    assert_close(double_out.cpu(), BINARY[op](a, b).double())
    x = a.to(device)
    getattr(x, f"{op}_")(b.to(device))
    assert_close(x.cpu(), getattr(a.clone(), f"{op}_")(b))


def test_in_place_errors_match_cpu(device):
    x = torch.ones(3, dtype=torch.int64, device=device)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        x.add_(torch.ones(3, device=device))
    with pytest.raises(RuntimeError):
        torch.ones(3, device=device).add_(torch.ones(2, 3, device=device))  # would need to grow self
    if torch.foo.device_count() > 1:
        with pytest.raises(RuntimeError, match="same device|two devices"):
            torch.ones(3, device="foo:0") + torch.ones(3, device="foo:1")
    with pytest.raises(RuntimeError, match="same device|two devices"):
        torch.ones(3, device=device) + torch.ones(3)


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_dtypes_without_native_kernels_use_the_fallback(device):
    a = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex32)  # no native kernel for complex32
    assert_close((a.to(device) + a.to(device)).cpu(), a + a)
    assert_close((a.to(device) * a.to(device)).cpu(), a * a)
    with pytest.raises(NotImplementedError, match="UInt16"):  # nor on the CPU: the same error
        torch.ones(2, dtype=torch.uint16, device=device) + 1


def test_operators_the_cpu_lacks_are_a_clear_error(device):
    """An operator with kernels for other devices only (cuSPARSELt's compression here) and none for this
    device cannot run on the CPU fallback either: the error says so, instead of the dispatcher's "Could
    not run ... with arguments from the 'CPU' backend"."""
    with pytest.raises(
        NotImplementedError,
        match=r"operator aten::_cslt_compress has no foo kernel, and the CPU fallback cannot run it: "
        r"the CPU has no kernel of it either \(no CPU kernel",
    ):
        torch.ops.aten._cslt_compress(torch.ones(4, 4, device=device))


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_complex32_as_cuda_computes_it(device):
    """complex32 operators the CPU lacks run in complex64 on the device, as CUDA computes them: with
    the result dtype asked for by name, and with half tensors among the arguments."""
    a = torch.tensor([[1 + 2j, 3 - 1j, 0.5j], [2, -1j, 1 + 1j]], dtype=torch.complex64)
    on_device = a.to(torch.complex32).to(device)
    for reduce in (torch.sum, torch.prod, torch.cumsum):
        result = reduce(on_device, 1, dtype=torch.complex32)
        assert result.dtype == torch.complex32
        assert_close(result.cpu(), reduce(a.to(torch.complex32).to(torch.complex64), 1).to(torch.complex32))
    real, imag = on_device.real.contiguous(), on_device.imag.contiguous()
    assert real.dtype == torch.float16
    assert_close(torch.complex(real, imag).cpu(), a.to(torch.complex32), rtol=0, atol=0)


def test_fill_every_dtype(device):
    for dtype in [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int8,
        torch.int64,
        torch.bool,
        torch.complex64,
        torch.complex128,
        torch.uint16,
        torch.float8_e4m3fn,
    ]:
        x = torch.empty(3, 4, dtype=dtype, device=device)
        value = True if dtype == torch.bool else 3
        x.fill_(value)
        assert_close(x.cpu(), torch.full((3, 4), value, dtype=dtype), msg=str(dtype))
        x.t()[1:].fill_(0)
        expected = torch.full((3, 4), value, dtype=dtype)
        expected.t()[1:].fill_(0)
        assert_close(x.cpu(), expected, msg=str(dtype))


FALLBACK_CASES = {
    "sin": lambda x: torch.sin(x),
    "exp": lambda x: x.exp(),
    "sum": lambda x: x.sum(dim=1),
    "mean": lambda x: x.mean(),
    "matmul": lambda x: x @ x.t(),
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "cat": lambda x: torch.cat([x, x * 2], dim=0),
    "sort": lambda x: torch.sort(x, dim=1).values,
    "argmax": lambda x: x.argmax(dim=1),
    "where": lambda x: torch.where(x > 0, x, -x),
    "index_select": lambda x: x.index_select(0, torch.tensor([2, 0], device=x.device)),
    "cumsum": lambda x: x.cumsum(0),
    "max": lambda x: x.max(),
    "clamp": lambda x: x.clamp(-0.5, 0.5),
    "masked_fill": lambda x: x.masked_fill(x < 0, 0.0),
}


@pytest.mark.parametrize("name", list(FALLBACK_CASES))
def test_fallback_ops_match_cpu(device, name):
    x = make((4, 5), torch.float32, 7) - 2
    result = FALLBACK_CASES[name](x.to(device))
    assert result.device == device
    assert_close(result.cpu(), FALLBACK_CASES[name](x))


@pytest.mark.parametrize("numel", [1, 16, 17, 1000, 16384, 16385, 70000])
def test_fallback_host_copies_of_each_size(device, numel):
    """The fallback's host copies of device arguments reuse blocks kept by power-of-two size up to 64 KiB
    (StagingAllocator, csrc/aten/Copy.cpp): each size around a class's edges and beyond the last, a reused
    block holding another call's values, and in-place and out= results written back."""
    x, y = make((numel,), torch.float32, 3), make((numel,), torch.float32, 4)
    d, e = x.to(device), y.to(device)
    for _ in range(3):  # the second and third calls take the blocks the first gave back
        assert_close(torch.sin(d).cpu(), torch.sin(x))
        assert_close(torch.sin(e).cpu(), torch.sin(y))
    e.tan_()
    assert_close(e.cpu(), y.tan())
    out = torch.empty(0, device=device)
    torch.cos(d, out=out)
    assert_close(out.cpu(), torch.cos(x))


def test_fallback_host_copies_from_several_threads(device):
    """Blocks of the fallback's host copies are taken and given back by several threads at once."""
    inputs = [make((n,), torch.float32, n) for n in (5, 40, 300, 2000)]
    errors = []

    def work(k):
        try:
            xs = [x.to(device) for x in inputs]
            for i in range(100):
                j = (i + k) % len(inputs)
                assert_close(torch.sin(xs[j]).cpu(), torch.sin(inputs[j]))
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)


def test_fallback_ops_are_recorded_and_native_ops_are_not(run_python):
    # A new interpreter: fallback records and the environment are per process.
    code = (
        "import torch, torch_foo\n"
        "x = torch.randn(3, device='foo')\n"
        "torch.cos(x); x + x; x * 2; x.sub_(1); x.div(3).fill_(0)\n"
        "print(torch_foo.fallback_ops())\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    ops = eval(result.stdout)
    assert "aten::cos" in ops
    assert not [op for op in ops if op.split("::")[1].split(".")[0] in {"add", "sub", "mul", "div", "fill_"}]


def test_warn_fallback_environment_variable(run_python):
    code = "import torch, torch_foo; torch.tan(torch.ones(2, device='foo'))"
    result = run_python(code, FOO_WARN_FALLBACK="1")
    assert result.returncode == 0, result.stderr
    assert "aten::tan" in result.stderr and "CPU fallback" in result.stderr

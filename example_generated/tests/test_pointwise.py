"""Activations, optimizer updates and sums on the device (csrc/aten/Pointwise.cpp,
csrc/aten/Reductions.cpp): relu and its gradient, sqrt, pow, addcmul, addcdiv, lerp, sum and mean run in the
operator library (fooOpPointwise, fooOpSum) instead of the CPU fallback.

The pointwise results are the CPU's bit for bit, so that a model trained with Adam or SGD on the
device follows the CPU's (tests/test_training.py: a convolution's bias before a batch norm has a
gradient of pure rounding noise, which Adam turns into steps of the learning rate: one square root
one unit in the last place off the CPU's sends it elsewhere). A sum is within a rounding of the
CPU's: it adds in the CPU's order where the CPU walks the summed elements the same way (a bias
gradient over a batch), which depends on the width of the host's vector instructions."""

import copy

import pytest
import torch
import torch.nn.functional as F
from numerics import EXACT_SQRT, assert_matches_cpu
from torch.testing import assert_close

FLOATING = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
EXACT = {"rtol": 0, "atol": 0, "equal_nan": True}


def assert_equals_cpu(got, expected, name):
    """Bit for bit, except square roots on a driver whose roots are not the CPU's (numerics.py's
    EXACT_SQRT): those within the driver's numerics profile."""
    if "sqrt" in name or "square root" in name:
        assert_matches_cpu(got, expected, elementary=EXACT_SQRT)
    else:
        assert_close(got.cpu(), expected, **EXACT, msg=name)


def assert_raises_as_on_the_cpu(case, device):
    """case("cpu") and case(device) raise the same exception with the same message."""
    with pytest.raises((RuntimeError, IndexError)) as on_cpu:
        case("cpu")
    with pytest.raises(type(on_cpu.value)) as on_device:
        case(device)
    assert str(on_device.value) == str(on_cpu.value)


def make(shape, dtype, seed, positive=False):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float64)
    return (t.abs() + 0.1 if positive else t).to(dtype)


# name: (operation, its operands' shapes): 4099 elements cover the vector loops and their tails.
OPERATIONS = {
    "sqrt": (lambda x: torch.sqrt(x[0]), 1),
    "relu": (lambda x: torch.relu(x[0]), 1),
    "threshold_backward": (lambda x: torch.ops.aten.threshold_backward(x[1], x[0], 0.25), 2),
    "addcmul": (lambda x: torch.addcmul(x[0], x[1], x[2], value=-0.37), 3),
    "addcdiv": (lambda x: torch.addcdiv(x[0], x[1], x[2], value=-0.37), 3),
    "lerp_small_weight": (lambda x: torch.lerp(x[0], x[1], 0.1), 2),
    "lerp_large_weight": (lambda x: torch.lerp(x[0], x[1], 0.9), 2),
    "lerp_negative_weight": (lambda x: torch.lerp(x[0], x[1], -0.7), 2),
    "lerp_tensor_weight": (lambda x: torch.lerp(x[0], x[1], x[2]), 3),
}


def operands(count, dtype, device="cpu"):
    tensors = [make((4099,), dtype, seed) for seed in range(count - 1)] + [make((4099,), dtype, 9, positive=True)]
    return [t.to(device) for t in tensors]


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("name", list(OPERATIONS))
def test_pointwise_results_equal_the_cpus(device, name, dtype):
    operation, count = OPERATIONS[name]
    got = operation(operands(count, dtype, device))
    assert got.device == device
    assert_equals_cpu(got, operation(operands(count, dtype)), name)


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
def test_in_place_updates_equal_the_cpus(device, dtype):
    updates = {
        "addcmul_": lambda p, a, b: p.addcmul_(a, b, value=0.001),
        "addcdiv_": lambda p, a, b: p.addcdiv_(a, b, value=-0.001),
        "lerp_": lambda p, a, b: p.lerp_(a, 0.1),
        "lerp_ tensor": lambda p, a, b: p.lerp_(a, b / 16),
        "relu_": lambda p, a, b: p.relu_(),
        "sqrt_": lambda p, a, b: p.sqrt_(),
    }
    for name, update in updates.items():
        expected = operands(3, dtype)
        got = operands(3, dtype, device)
        result = update(*got)
        assert result is got[0], name
        assert_equals_cpu(got[0], update(*expected), name)


def test_relu_keeps_nan_and_negative_zero(device):
    x = torch.tensor([float("nan"), -0.0, 0.0, -1.0, 2.0, float("-inf"), float("inf")])
    got = torch.relu(x.to(device)).cpu()
    assert_close(got, torch.relu(x), **EXACT)
    assert got.signbit().tolist() == torch.relu(x).signbit().tolist()


def test_strided_and_broadcast_operands(device):
    m = make((64, 34), torch.float32, 0)
    d = m.to(device)
    cases = {
        "transposed": lambda t: torch.addcmul(t.t(), t.t(), t.t(), value=2),
        "every other column": lambda t: torch.lerp(t[:, ::2], t[:, 1::2], 0.7),
        "broadcast row": lambda t: torch.addcdiv(t, t[0], t[:, :1].abs() + 1),
        "in place, broadcast operand": lambda t: t.clone().addcmul_(t[0], t[1]),
        "threshold of a view": lambda t: torch.ops.aten.threshold_backward(t[:, 1:], t[:, :-1], 0.0),
        "square root of a transposed view": lambda t: torch.sqrt(t.t().abs()),
        "empty": lambda t: torch.lerp(t[:0], t[:0], 0.5),
    }
    for name, case in cases.items():
        assert_equals_cpu(case(d), case(m), name)


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.ones(3, device=d).addcmul_(torch.ones(2, 3, device=d), torch.ones(3, device=d)),
        lambda d: torch.addcmul(torch.ones(3, device=d), torch.ones(2, device=d), torch.ones(3, device=d)),
        lambda d: torch.lerp(
            torch.ones(3, device=d), torch.ones(3, device=d), torch.ones(3, device=d, dtype=torch.float64)
        ),
        lambda d: torch.addcdiv(
            torch.ones(3, device=d, dtype=torch.int64),
            torch.ones(3, device=d, dtype=torch.int64),
            torch.ones(3, device=d, dtype=torch.int64),
        ),
        lambda d: torch.relu(torch.ones(3, device=d, dtype=torch.bool)),
        lambda d: (lambda t: t[:3].addcmul_(t[1:], torch.ones(3, device=d)))(torch.ones(4, device=d)),
        lambda d: torch.ones(3, device=d).expand(2, 3).lerp_(torch.zeros(2, 3, device=d), 0.5),
    ],
    ids=[
        "in_place_broadcast",
        "shapes",
        "weight_dtype",
        "integer_addcdiv",
        "bool_relu",
        "partial_overlap",
        "expanded_self",
    ],
)
def test_errors_match_the_cpus(device, case):
    with pytest.raises(RuntimeError) as on_cpu:
        case("cpu")
    with pytest.raises(RuntimeError) as on_device:
        case(device)
    assert str(on_device.value).split("\n")[0] == str(on_cpu.value).split("\n")[0]


def test_other_dtypes_and_mixed_operands_run_on_the_fallback(device):
    ints = torch.arange(-3, 5)
    cases = {
        "integer relu": lambda d: torch.relu(ints.to(d)),
        "integer sqrt (promoted to float)": lambda d: torch.sqrt(ints.abs().to(d)),
        "integer addcmul": lambda d: torch.addcmul(ints.to(d), ints.to(d), ints.to(d), value=2),
        "float and double": lambda d: torch.addcmul(
            torch.ones(3, device=d), torch.ones(3, device=d, dtype=torch.float64), torch.ones(3, device=d)
        ),
        "complex": lambda d: torch.lerp(
            torch.ones(3, dtype=torch.complex64, device=d), torch.zeros(3, dtype=torch.complex64, device=d), 0.25
        ),
        "a complex value": lambda d: torch.addcmul(
            torch.ones(3, dtype=torch.complex64, device=d),
            torch.ones(3, dtype=torch.complex64, device=d),
            torch.ones(3, dtype=torch.complex64, device=d),
            value=1j,
        ),
        "out=": lambda d: torch.sqrt(torch.ones(3, device=d), out=torch.empty(3, device=d)),
    }
    for name, case in cases.items():
        got, expected = case(device), case("cpu")
        assert got.device == device, name
        assert_close(got.cpu(), expected, **EXACT, msg=name)


SUMS = {
    "rows of a batch": lambda t: t.sum(0),
    "all": lambda t: t.sum(),
    "last dimension": lambda t: t.sum(-1),
    "two dimensions": lambda t: t.sum((0, 1)),
    "keepdim": lambda t: t.sum(1, keepdim=True),
    "negative and unordered dimensions": lambda t: t.sum((-1, 1)),
    "transposed input": lambda t: t.transpose(0, 2).sum(2),
    "dimensions apart (fallback)": lambda t: t.sum((0, 2)),
    "dtype= (fallback)": lambda t: t.sum(0, dtype=torch.float64),
    "empty dimension": lambda t: t[:, :0].sum(1),
    "sum of nothing": lambda t: t[:, :0].sum(),
}


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("name", list(SUMS))
def test_sums_equal_the_cpus_within_rounding(device, name, dtype):
    t = make((6, 35, 17), dtype, 0)
    got, expected = SUMS[name](t.to(device)), SUMS[name](t)
    assert got.device == device
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert got.is_contiguous()
    assert_close(got.cpu(), expected)


@pytest.mark.parametrize(
    "shape,dims", [((300, 700), 0), ((300, 700), 1), ((2, 3000, 50), (0, 1)), ((70000,), None)], ids=str
)
def test_sums_split_over_blocks(device, shape, dims):
    """Sums long enough that one launch splits its results over several blocks (and its columns
    over groups of 64 within a block)."""
    t = make(shape, torch.float32, 2)
    got = t.to(device).sum(dims) if dims is not None else t.to(device).sum()
    assert_close(got.cpu(), t.sum(dims) if dims is not None else t.sum())


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
def test_a_bias_gradient_sums_in_the_cpus_order(device, dtype):
    """Summing a batch's rows per feature, for as many features as the CPU's vector loops take a
    block of (a multiple of 64), adds in the CPU's order: bit for bit its result."""
    t = make((200, 512), dtype, 1)
    assert_close(t.to(device).sum(0).cpu(), t.sum(0), **EXACT)


def test_sum_errors_match_the_cpus(device):
    for dims in [(0, 0), 2, (-3,)]:
        assert_raises_as_on_the_cpu(lambda d, dims=dims: torch.ones(2, 3, device=d).sum(dims), device)


# pow's exponents: the CPU's operator has loops of its own for the first eight, the math library's pow
# computes the rest.
EXPONENTS = [0, 1, 2, 3, -2, 0.5, -0.5, -1, 2.5, 1 / 3, -1.7]


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("exponent", EXPONENTS, ids=lambda e: f"{e:.3g}")
def test_powers_equal_the_cpus(device, exponent, dtype):
    """x ** e, negative and zero bases included (NaN for a fractional exponent, infinities for a
    negative one): bit for bit where the CPU computes one elementary operation (a fill, a copy,
    x * x), else as accurate as the CPU's."""
    x = make((4099,), dtype, 3)
    x[:3] = torch.tensor([0.0, -0.0, -2.0])
    got, expected = (x.to(device) ** exponent), x**exponent
    assert got.device == device and got.dtype == dtype
    elementary = exponent in (0, 1) or (exponent == 2 and dtype != torch.float16)
    reference = x.double() ** pow_exponent(exponent, dtype)
    assert_matches_cpu(got, expected, elementary=elementary, reference=reference)
    in_place = x.to(device)
    assert in_place.pow_(exponent) is in_place
    assert_matches_cpu(in_place, expected, elementary=elementary, reference=reference)


def pow_exponent(exponent, dtype):
    """The exponent as the CPU's operator takes it: rounded to the dtype for the 16-bit types."""
    if dtype in (torch.float16, torch.bfloat16):
        return torch.tensor(exponent, dtype=dtype).item()
    return exponent


def test_powers_of_other_kinds_run_on_the_fallback(device):
    """Integer tensors, a complex exponent, a tensor exponent and out= give the CPU's results."""
    i = torch.arange(-3, 5)
    x = make((16,), torch.float32, 4, positive=True)
    cases = {
        "integer base": lambda d: i.to(d) ** 2,
        "integer base, float exponent": lambda d: i.to(d) ** 0.5,
        "complex exponent": lambda d: x.to(d) ** complex(2, 1),
        "tensor exponent": lambda d: x.to(d) ** x.to(d),
        "out=": lambda d: torch.pow(x.to(d), 2, out=torch.empty(16, device=d)),
    }
    for name, case in cases.items():
        got, expected = case(device), case("cpu")
        assert got.device == device and got.dtype == expected.dtype, name
        assert_close(got.cpu(), expected, msg=name, equal_nan=True)
    # An exponent a 16-bit dtype cannot hold: the CPU's error.
    assert_raises_as_on_the_cpu(lambda d: x.half().to(d) ** 1e6, device)


MEANS = {
    "rows of a batch": lambda t: t.mean(0),
    "all": lambda t: t.mean(),
    "last dimension": lambda t: t.mean(-1),
    "two dimensions": lambda t: t.mean((0, 1)),
    "keepdim": lambda t: t.mean(1, keepdim=True),
    "transposed input": lambda t: t.transpose(0, 2).mean(2),
    "dimensions apart (fallback)": lambda t: t.mean((0, 2)),
    "dtype= (fallback)": lambda t: t.mean(0, dtype=torch.float64),
    "mean of nothing": lambda t: t[:, :0].mean(),
    "empty dimension": lambda t: t[:, :0].mean(1),
}


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("name", list(MEANS))
def test_means_equal_the_cpus_within_rounding(device, name, dtype):
    t = make((6, 35, 17), dtype, 5)
    got, expected = MEANS[name](t.to(device)), MEANS[name](t)
    assert got.device == device
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert_close(got.cpu(), expected, equal_nan=True)


@pytest.mark.parametrize("dtype", FLOATING, ids=str)
def test_a_batch_mean_divides_as_the_cpu(device, dtype):
    """A mean over a batch's rows sums in the CPU's order (as a bias gradient does) and divides once:
    for the 16-bit types in float, rounded at the end, so the CPU's result bit for bit."""
    t = make((200, 512), dtype, 6)
    assert_matches_cpu(t.to(device).mean(0), t.mean(0), elementary=True, division=True)


def test_mean_errors_match_the_cpus(device):
    for dtype, dims in [(torch.float32, (0, 0)), (torch.float32, 2), (torch.long, 0)]:
        assert_raises_as_on_the_cpu(
            lambda d, t=dtype, dims=dims: torch.ones(2, 3, dtype=t, device=d).mean(dims), device
        )


def test_optimizers_and_activations_run_on_the_device(run_python):
    # A new interpreter: the fallback's record is per process.
    code = (
        "import torch, torch_foo\n"
        "model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to('foo')\n"
        "for optimizer in (torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop):\n"
        "    step = optimizer(model.parameters(), lr=0.01)\n"
        "    for foreach in (False, True):\n"
        "        step.param_groups[0]['foreach'] = foreach\n"
        "        model(torch.randn(4, 8, device='foo')).square().mean().backward()\n"
        "        step.step()\n"
        "print(torch_foo.fallback_ops())\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    on_fallback = {op.split("::")[1].split(".")[0] for op in eval(result.stdout)}
    native = {"relu", "threshold_backward", "sqrt", "addcmul", "addcdiv", "lerp", "sum", "pow", "mean"}
    assert not on_fallback & {name + suffix for name in native for suffix in ("", "_")}, on_fallback


def test_training_with_adam_follows_the_cpu(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    x, y = torch.randn(96, 12), torch.randint(0, 3, (96,))
    results = []
    for where in ("cpu", device):
        moved = copy.deepcopy(model).to(where)
        optimizer = torch.optim.Adam(moved.parameters(), lr=0.01)
        for _ in range(5):
            optimizer.zero_grad()
            F.cross_entropy(moved(x.to(where)), y.to(where)).backward()
            optimizer.step()
        results.append([p.detach().cpu() for p in moved.parameters()])
    for expected, got in zip(*results, strict=True):
        assert_close(got, expected, rtol=1e-5, atol=1e-6)

"""Random numbers: the device generators, seeding and state APIs of torch.foo, and random
operators that draw from the device generator (native kernels and the CPU fallback alike), never
from the CPU one. Values cannot equal the CPU's (another generator), so distributions are compared
by their statistics, with fixed seeds."""

import multiprocessing

import pytest
import torch
import torch.utils.checkpoint
from torch.testing import assert_close

DEVICE = "foo"

# Every random operator a user can reach, as fn(device) -> tensor. The first group has native
# kernels (csrc/aten/Random.cpp), the second runs on the CPU fallback with a seeded CPU generator.
RANDOM_OPS = {
    "rand": lambda d: torch.rand(64, device=d),
    "randn": lambda d: torch.randn(64, device=d),
    "randint": lambda d: torch.randint(-5, 5, (64,), device=d),
    "rand_like": lambda d: torch.rand_like(torch.empty(8, 8, device=d, dtype=torch.float64)),
    "randn_half": lambda d: torch.randn(64, device=d, dtype=torch.float16),
    "uniform_": lambda d: torch.empty(64, device=d).uniform_(-2, 3),
    "normal_": lambda d: torch.empty(64, device=d).normal_(1, 2),
    "normal_tensor": lambda d: torch.normal(torch.zeros(64, device=d), torch.ones(64, device=d)),
    "normal_complex": lambda d: torch.randn(16, device=d, dtype=torch.complex64),
    "bernoulli_p": lambda d: torch.bernoulli(torch.full((64,), 0.3, device=d)),
    "bernoulli_float": lambda d: torch.empty(64, device=d).bernoulli_(0.7),
    "random_": lambda d: torch.empty(64, device=d, dtype=torch.int32).random_(),
    "random_to": lambda d: torch.empty(64, device=d).random_(10),
    "exponential_": lambda d: torch.empty(64, device=d).exponential_(2.0),
    "geometric_": lambda d: torch.empty(64, device=d).geometric_(0.3),
    "log_normal_": lambda d: torch.empty(64, device=d).log_normal_(),
    "cauchy_": lambda d: torch.empty(64, device=d).cauchy_(),
    "dropout": lambda d: torch.nn.functional.dropout(torch.ones(64, device=d), 0.5),
    "multinomial": lambda d: torch.multinomial(torch.ones(64, device=d), 32),
    "randperm": lambda d: torch.randperm(64, device=d),
    "poisson": lambda d: torch.poisson(torch.full((64,), 3.0, device=d)),
    "binomial": lambda d: torch.binomial(torch.full((64,), 10.0, device=d), torch.full((64,), 0.5, device=d)),
    "gamma": lambda d: torch._standard_gamma(torch.full((64,), 2.0, device=d)),
    "dirichlet": lambda d: torch._sample_dirichlet(torch.ones(8, 4, device=d)),
    "rrelu": lambda d: torch.nn.functional.rrelu(-torch.ones(64, device=d), training=True),
}


@pytest.mark.parametrize("op", RANDOM_OPS, ids=list(RANDOM_OPS))
def test_random_ops_use_the_device_generator_not_the_cpu_one(op, device):
    fn = RANDOM_OPS[op]
    cpu_state = torch.get_rng_state()
    with torch.foo.device(device):
        torch.foo.manual_seed(1234)
        first = fn(device)
        after_first = torch.foo.get_rng_state(device)
        torch.foo.manual_seed(1234)
        again = fn(device)
        other = fn(device)  # the state moved on: new numbers
    assert first.device == device
    assert torch.equal(first.cpu(), again.cpu()), "same device seed, different numbers"
    assert not torch.equal(first.cpu(), other.cpu()), "the device generator did not advance"
    assert not torch.equal(after_first, torch.foo.get_rng_state(device))
    assert torch.equal(torch.get_rng_state(), cpu_state), "the CPU generator was used"


def test_uniform_and_normal_statistics(device):
    g = torch.Generator(device=device).manual_seed(0)
    u = torch.empty(200_000, device=device).uniform_(-1, 3, generator=g).cpu()
    assert u.min() >= -1 and u.max() < 3
    assert abs(u.mean().item() - 1.0) < 0.02 and abs(u.var().item() - 16 / 12) < 0.02
    n = torch.empty(200_000, device=device, dtype=torch.float64).normal_(2.0, 3.0, generator=g).cpu()
    assert abs(n.mean().item() - 2.0) < 0.03 and abs(n.std().item() - 3.0) < 0.03
    # A third of normal samples lie beyond one standard deviation.
    assert abs(((n - 2).abs() > 3).double().mean().item() - 0.3173) < 0.005


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_uniform_stays_below_the_upper_bound(dtype, device):
    x = torch.empty(100_000, device=device, dtype=dtype).uniform_(0, 1).cpu()
    assert x.min() >= 0 and x.max() < 1


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float32])
def test_random_integers_cover_their_range(dtype, device):
    x = torch.empty(20_000, device=device, dtype=dtype).random_(3, 10).cpu()
    assert set(x.tolist()) == set(range(3, 10))
    full = torch.empty(20_000, device=device, dtype=dtype).random_().cpu()
    assert full.min() >= 0
    if dtype != torch.float32:
        assert full.max() <= torch.iinfo(dtype).max and full.max() > torch.iinfo(dtype).max // 2


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_random_of_the_wide_unsigned_types_stays_in_range(dtype, device):
    # The CPU has no random_() for them; the device draws them itself (for uint64, max + 1 wraps to 0,
    # which the emulated library once divided by).
    values = torch.empty(1000, device=device, dtype=dtype).random_().cpu().tolist()
    assert all(0 <= value <= torch.iinfo(dtype).max for value in values)
    assert len(set(values)) > 900


def test_other_distributions_statistics(device):
    torch.foo.manual_seed_all(7)
    n = 200_000
    b = torch.empty(n, device=device).bernoulli_(0.25).cpu()
    assert set(b.unique().tolist()) == {0.0, 1.0} and abs(b.mean().item() - 0.25) < 0.01
    p = torch.rand(n, device=device)
    assert abs(torch.bernoulli(p).cpu().mean().item() - 0.5) < 0.01
    e = torch.empty(n, device=device).exponential_(4.0).cpu()
    assert e.min() >= 0 and abs(e.mean().item() - 0.25) < 0.01
    g = torch.empty(n, device=device).geometric_(0.2).cpu()
    assert g.min() >= 1 and abs(g.mean().item() - 5.0) < 0.1
    ln = torch.empty(n, device=device).log_normal_(0.0, 0.5).cpu()
    assert abs(ln.log().mean().item()) < 0.01 and abs(ln.log().std().item() - 0.5) < 0.01
    c = torch.empty(n, device=device).cauchy_(1.0, 2.0).cpu()
    assert abs(c.median().item() - 1.0) < 0.05


def test_dropout_keeps_and_scales_like_cpu(device):
    torch.foo.manual_seed_all(3)
    x = torch.randn(100_000, device=device, requires_grad=True)
    y = torch.nn.functional.dropout(x, p=0.3)
    kept = y.detach().cpu() != 0
    assert abs(kept.double().mean().item() - 0.7) < 0.01
    assert_close(y.detach().cpu()[kept], x.detach().cpu()[kept] / 0.7)
    y.sum().backward()  # native_dropout_backward: the mask, scaled
    assert_close(x.grad.cpu(), kept.float() / 0.7)
    assert torch.equal(torch.nn.functional.dropout(x, p=0.3, training=False).cpu(), x.detach().cpu())
    assert torch.equal(torch.nn.functional.dropout(x, p=0.0).detach().cpu(), x.detach().cpu())
    assert not torch.nn.functional.dropout(x, p=1.0).detach().cpu().any()


def test_dropout_module_reproducible_under_a_seed(device):
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(0.5)).to(device)
    x = torch.randn(8, 16, device=device)
    torch.foo.manual_seed_all(11)
    first = model(x)
    torch.foo.manual_seed_all(11)
    assert torch.equal(model(x).cpu(), first.cpu())
    model.eval()
    assert torch.equal(model(x).cpu(), model[0](x).cpu())


def test_random_into_non_contiguous_output(device):
    x = torch.zeros(64, 32, device=device).t()
    x.uniform_(5, 6)
    assert (x.cpu() >= 5).all() and (x.cpu() < 6).all()
    y = torch.zeros(64, 32, device=device)[:, ::2]
    y.normal_()
    full = torch.zeros(64, 32, device=device)
    full[:, ::2] = y
    assert (full.cpu()[:, 1::2] == 0).all() and (full.cpu()[:, ::2] != 0).all()


def test_seed_functions():
    torch.foo.manual_seed(42)
    assert torch.foo.initial_seed() == 42
    s = torch.foo.seed()
    assert torch.foo.initial_seed() == s
    s_all = torch.foo.seed_all()
    assert all(g.initial_seed() == s_all for g in torch.foo.default_generators)
    torch.foo.manual_seed_all(5)
    assert [g.initial_seed() for g in torch.foo.default_generators] == [5] * torch.foo.device_count()


@pytest.mark.two_devices
def test_each_device_has_its_own_generator():
    torch.foo.manual_seed_all(0)
    a0 = torch.rand(8, device="foo:0")
    state1 = torch.foo.get_rng_state(1)
    torch.rand(8, device="foo:0")
    assert torch.equal(torch.foo.get_rng_state(1), state1), "device 0 ops advanced device 1"
    a1 = torch.rand(8, device="foo:1")
    assert torch.equal(a0.cpu(), a1.cpu())  # same seed, same stream
    with torch.foo.device(1):
        torch.foo.manual_seed(9)  # the current device only
    assert torch.foo.default_generators[1].initial_seed() == 9
    assert torch.foo.default_generators[0].initial_seed() == 0


def test_rng_state_round_trip(device):
    torch.foo.manual_seed_all(1)
    state = torch.foo.get_rng_state(device)
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = torch.randn(32, device=device)
    torch.foo.set_rng_state(state, device)
    assert torch.equal(torch.randn(32, device=device).cpu(), first.cpu())
    states = torch.foo.get_rng_state_all()
    assert len(states) == torch.foo.device_count()
    expected = [torch.rand(4, device=f"foo:{i}").cpu() for i in range(len(states))]
    torch.foo.set_rng_state_all(states)
    for i, e in enumerate(expected):
        assert torch.equal(torch.rand(4, device=f"foo:{i}").cpu(), e)


def test_bad_rng_state_is_rejected_and_changes_nothing():
    state = torch.foo.get_rng_state()
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.foo.set_rng_state(torch.zeros(5, dtype=torch.uint8))
    with pytest.raises(TypeError, match="ByteTensor"):
        torch.foo.set_rng_state(torch.zeros(16))
    with pytest.raises(TypeError):
        torch.foo.set_rng_state([0] * 16)
    with pytest.raises(ValueError, match="one per device"):
        torch.foo.set_rng_state_all([state] * (torch.foo.device_count() + 1))
    with pytest.raises(RuntimeError, match="Invalid foo device index"):
        torch.foo.get_rng_state(99)
    assert torch.equal(torch.foo.get_rng_state(), state)


def test_explicit_generator(device):
    default_state = torch.foo.get_rng_state(device)
    g = torch.Generator(device=device)
    assert g.device == device
    g.manual_seed(21)
    a = torch.randn(16, device=device, generator=g)
    assert torch.equal(torch.foo.get_rng_state(device), default_state), "used the default generator"
    g2 = torch.Generator(device=device).manual_seed(21)
    assert torch.equal(torch.randn(16, device=device, generator=g2).cpu(), a.cpu())
    g3 = torch.Generator(device=device).manual_seed(21)
    assert torch.equal(
        torch.multinomial(torch.ones(20, device=device), 10, generator=g3).cpu(),
        torch.multinomial(
            torch.ones(20, device=device), 10, generator=torch.Generator(device=device).manual_seed(21)
        ).cpu(),
    )
    clone = g.clone_state()
    assert torch.equal(
        torch.rand(4, device=device, generator=clone).cpu(), torch.rand(4, device=device, generator=g).cpu()
    )


def test_generator_of_the_wrong_device_is_an_error():
    with pytest.raises(RuntimeError, match="Expected a 'foo' device type for generator"):
        torch.rand(3, device=DEVICE, generator=torch.Generator())
    with pytest.raises(RuntimeError, match="Expected a 'foo' device type for generator"):
        torch.multinomial(torch.ones(3, device=DEVICE), 2, generator=torch.Generator())


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.empty(3, device=d).uniform_(2, 1),
        lambda d: torch.empty(3, device=d).normal_(0, -1),
        lambda d: torch.empty(3, device=d).bernoulli_(1.5),
        lambda d: torch.empty(3, device=d).bernoulli_(torch.full((3,), 2.0, device=d)),
        lambda d: torch.empty(3, device=d).random_(5, 5),
        lambda d: torch.empty(3, device=d, dtype=torch.int8).random_(0, 1000),
        lambda d: torch.empty(3, device=d).exponential_(-1),
        lambda d: torch.empty(3, device=d).geometric_(1.5),
        lambda d: torch.empty(3, device=d, dtype=torch.int32).normal_(),
        lambda d: torch.empty(3, device=d).bernoulli_(torch.ones(2, device=d) / 2),
    ],
)
def test_bad_arguments_raise_like_cpu(call):
    with pytest.raises(Exception) as cpu_error:
        call("cpu")
    before = torch.foo.get_rng_state()
    with pytest.raises(type(cpu_error.value)):
        call(DEVICE)
    assert torch.equal(torch.foo.get_rng_state(), before)


def test_fork_rng_restores_device_state():
    torch.foo.manual_seed_all(8)
    with torch.random.fork_rng(device_type=DEVICE, devices=range(torch.foo.device_count())):
        inside = torch.rand(8, device=DEVICE)
    assert torch.equal(torch.rand(8, device=DEVICE).cpu(), inside.cpu())


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_activation_checkpointing_recomputes_the_same_dropout(use_reentrant):
    layer = torch.nn.Linear(8, 8).to(DEVICE)

    def block(x):
        return torch.nn.functional.dropout(layer(x), 0.5).tanh()

    x = torch.randn(4, 8, device=DEVICE, requires_grad=True)
    torch.foo.manual_seed(0)
    block(x).sum().backward()
    expected = x.grad.cpu()
    x.grad = None
    torch.foo.manual_seed(0)
    torch.utils.checkpoint.checkpoint(block, x, use_reentrant=use_reentrant).sum().backward()
    assert torch.equal(x.grad.cpu(), expected)


def test_torch_manual_seed_seeds_the_device():
    torch.manual_seed(123)
    a = torch.rand(8, device=DEVICE)
    cpu_a = torch.rand(8)
    torch.manual_seed(123)
    assert torch.equal(torch.rand(8, device=DEVICE).cpu(), a.cpu())
    assert torch.equal(torch.rand(8), cpu_a)
    assert all(g.initial_seed() == 123 for g in torch.foo.default_generators)


def _seeded_draws_in_child(seed: int) -> list[float]:
    import torch

    import torch_foo  # noqa: F401

    torch.foo.manual_seed_all(seed)
    x = torch.randn(6, device="foo")
    return (torch.nn.functional.dropout(x, 0.5) + x).cpu().tolist()


def test_spawned_child_uses_the_device_and_its_seed():
    torch.foo.manual_seed_all(77)
    x = torch.randn(6, device=DEVICE)
    expected = (torch.nn.functional.dropout(x, 0.5) + x).cpu().tolist()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        # A child that cannot import the backend (a build_ext --inplace build that was never installed)
        # is restarted by the pool forever: fail after a bound instead of hanging.
        assert pool.apply_async(_seeded_draws_in_child, (77,)).get(timeout=120) == expected

"""The asynchronous eager CPU fallback (torch.foo.set_async_fallback): operators whose results'
shapes follow from their arguments' metadata are queued on the stream and return at once, with the
synchronous path's results; the others take the synchronous path; a CPU kernel's error surfaces at the
next synchronisation; inputs changed or freed after the call do not change its result; two threads and a
fork (docs/integration/cpu-fallback.md, The asynchronous eager fallback)."""

import threading

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_foo

DEVICE = "foo"


@pytest.fixture
def async_fallback():
    """The asynchronous fallback on for one test, and off again after it (a pending error is raised there)."""
    torch_foo.set_async_fallback(True)
    yield
    torch_foo.set_async_fallback(False)
    torch.foo.synchronize()


def calls(name: str, path: str) -> int:
    return torch_foo.fallback_paths().get(name, {"sync": 0, "async": 0})[path]


# Operators without a foo kernel, with the schema name each reaches the fallback as.
CASES = {
    "sin": (lambda x, y: torch.sin(x), "aten::sin"),
    "lgamma_transposed": (lambda x, y: torch.lgamma(x.t()), "aten::lgamma"),
    "atan2": (lambda x, y: torch.atan2(x, y), "aten::atan2"),
    "sin_inplace": (lambda x, y: x.clone().sin_(), "aten::sin_"),
    "sin_out": (lambda x, y: torch.sin(x, out=torch.empty_like(x)), "aten::sin.out"),
    "cumsum": (lambda x, y: torch.cumsum(x, 1), "aten::cumsum"),
    "stepped_slice": (lambda x, y: torch.erfinv(x[:, ::2] / 4), "aten::erfinv"),
    "read_twice": (lambda x, y: torch.hypot(x, x), "aten::hypot"),
    "cat_read_list": (lambda x, y: torch.cat([torch.sinh(x), y]), "aten::sinh"),
    "mse_loss": (lambda x, y: F.mse_loss(x, y), "aten::mse_loss"),
}


def test_the_switch_is_off_by_default_and_the_environment_turns_it_on(run_python):
    code = "import torch, torch_foo; print(torch_foo.async_fallback_enabled())"
    off = run_python(code)
    on = run_python(code, FOO_ASYNC_FALLBACK="1")
    assert (off.returncode, on.returncode) == (0, 0), off.stderr + on.stderr
    assert (off.stdout.strip(), on.stdout.strip()) == ("False", "True")
    assert not torch_foo.async_fallback_enabled()
    torch_foo.set_async_fallback(True)
    assert torch_foo.async_fallback_enabled()
    torch_foo.set_async_fallback(False)
    assert not torch_foo.async_fallback_enabled()


@pytest.mark.parametrize("case", CASES)
def test_results_equal_the_synchronous_path(case):
    fn, name = CASES[case]
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    y = torch.randn(4, 6, generator=torch.Generator().manual_seed(2))
    synchronous = fn(x.to(DEVICE), y.to(DEVICE)).cpu()
    torch_foo.set_async_fallback(True)
    try:
        before = calls(name, "async")
        result = fn(x.to(DEVICE), y.to(DEVICE))
        assert result.device.type == DEVICE
        assert calls(name, "async") == before + 1, torch_foo.fallback_paths()
        asynchronous = result.cpu()
    finally:
        torch_foo.set_async_fallback(False)
    assert_close(asynchronous, synchronous, rtol=0, atol=0)
    assert_close(asynchronous, fn(x, y))


def test_operators_it_cannot_serve_take_the_synchronous_path(async_fallback):
    x = torch.tensor([0.0, 1.5, 0.0, -2.0], device=DEVICE)
    cases = [
        ("aten::nonzero", lambda: torch.nonzero(x), torch.tensor([[1], [3]])),  # data-dependent shape
        ("aten::cummax", lambda: torch.cummax(x, 0).values, torch.tensor([0.0, 1.5, 1.5, 1.5])),  # no meta function
        ("aten::unbind.int", lambda: torch.stack(torch.unbind(torch.sinh(x))), torch.sinh(x.cpu())),  # list result
    ]
    for name, fn, expected in cases:
        before = torch_foo.fallback_paths().get(name, {"sync": 0, "async": 0})
        assert_close(fn().cpu(), expected)
        after = torch_foo.fallback_paths().get(name, {"sync": 0, "async": 0})
        if name in torch_foo.fallback_ops():
            assert after["async"] == before["async"], name
            assert after["sync"] > before["sync"], name
    # A random operator: seeded from the device generator at the call, on the synchronous path.
    torch.foo.manual_seed(3)
    first = torch.poisson(torch.full((5,), 4.0, device=DEVICE)).cpu()
    torch.foo.manual_seed(3)
    assert_close(torch.poisson(torch.full((5,), 4.0, device=DEVICE)).cpu(), first)
    assert calls("aten::poisson", "async") == 0


def test_a_cpu_kernel_error_surfaces_at_the_next_synchronisation(async_fallback):
    logits = torch.randn(3, 5, device=DEVICE).log_softmax(1)
    target = torch.tensor([1, 7, 2], device=DEVICE)  # 7 is out of range
    loss = F.nll_loss(logits, target)  # returns at once
    assert loss.device.type == DEVICE
    with pytest.raises(RuntimeError, match=r"nll_loss.* \(the asynchronous CPU fallback\) failed: .*out of bounds"):
        torch.foo.synchronize()
    assert torch.isnan(loss.cpu()), "the failed operator's output holds NaN, not a stale value"
    torch.foo.synchronize()  # raised once: the device goes on working
    assert_close((torch.ones(2, device=DEVICE) * 3).cpu(), torch.full((2,), 3.0))
    # The same error surfaces at .item(), a synchronising copy, as on CUDA.
    loss = F.nll_loss(logits, target)
    with pytest.raises(RuntimeError, match="out of bounds"):
        loss.item()
    # And at a stream's synchronize().
    F.nll_loss(logits, target)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.foo.current_stream().synchronize()


def test_the_synchronous_path_raises_at_the_call():
    logits = torch.randn(3, 5, device=DEVICE).log_softmax(1)
    with pytest.raises((RuntimeError, IndexError), match="out of bounds"):
        F.nll_loss(logits, torch.tensor([1, 7, 2], device=DEVICE))


def test_inputs_changed_or_freed_after_the_call_do_not_change_its_result(async_fallback):
    x = torch.linspace(0.5, 3.0, 1000)
    d = x.to(DEVICE)
    y = torch.lgamma(d)
    d.mul_(10)  # a native in-place write, later in stream order than the staging copy
    assert_close(y.cpu(), torch.lgamma(x))
    # A CPU tensor the operator reads is copied at the call: a change on the host afterwards is not seen.
    exponent = torch.tensor(2.0)
    z = torch.pow(x.to(DEVICE)[:4], exponent)
    exponent.fill_(5.0)
    assert_close(z.cpu(), x[:4] ** 2)
    # Inputs freed at once, their memory reused by later work on the stream.
    results = [torch.sinh(torch.full((256,), float(i), device=DEVICE)) for i in range(20)]
    clobber = [torch.full((256,), -1.0, device=DEVICE) for _ in range(20)]
    for i, r in enumerate(results):
        assert_close(r.cpu(), torch.sinh(torch.full((256,), float(i))))
    del clobber


def test_many_calls_queued_without_synchronising(async_fallback):
    x = torch.rand(64, device=DEVICE)
    expected = x.cpu()
    for _ in range(200):
        x = torch.sinh(torch.asinh(x))
        expected = torch.sinh(torch.asinh(expected))
    assert_close(x.cpu(), expected)


def test_two_threads_on_their_own_streams(async_fallback):
    errors = []

    def work(seed):
        try:
            stream = torch.foo.Stream()
            generator = torch.Generator().manual_seed(seed)
            with torch.foo.stream(stream):
                for _ in range(50):
                    x = torch.rand(3, 17, generator=generator)
                    y = torch.atan2(torch.lgamma(x.to(DEVICE) + 1), x.to(DEVICE).t().contiguous().t())
                    assert_close(y.cpu(), torch.atan2(torch.lgamma(x + 1), x))
        except Exception as error:  # noqa: BLE001  reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    assert errors == []


def test_fork_after_asynchronous_calls(run_python):
    # The fork waits for the queued CPU kernels (the package's before-fork hook): the child finds none in
    # flight, and so no lock held by a stream's worker that it would wait on forever (it hung, under ASan).
    code = """
        import os, torch, torch_foo
        torch_foo.set_async_fallback(True)
        x = torch.sinh(torch.ones(8, device="foo"))
        y = torch.full((1 << 18,), 0.5, device="foo")
        for _ in range(20):
            y = torch.asinh(torch.sinh(y))  # queued, most likely still running when the fork is asked for
        pid = os.fork()
        if pid == 0:
            if torch_foo._C._async_fallback_calls_in_flight() != 0:
                os._exit(5)
            try:
                torch.cosh(torch.ones(2)).to("foo")
                os._exit(3)
            except RuntimeError as error:
                os._exit(0 if "forked subprocess" in str(error) else 4)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), "parent", round(torch.sinh(x).sum().item(), 3))
        assert torch.allclose(y.cpu(), torch.full((1 << 18,), 0.5))
        print("paths", torch_foo.fallback_paths()["aten::sinh"]["async"] > 20)
    """
    result = run_python(code, timeout=120)
    assert result.returncode == 0, result.stderr
    expected = round(torch.sinh(torch.sinh(torch.ones(8))).sum().item(), 3)
    assert result.stdout.split() == ["child", "0", "parent", str(expected), "paths", "True"], result.stdout

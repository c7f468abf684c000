"""Automatic mixed precision: torch.autocast("foo") casts like CUDA's policy, and
torch.amp.GradScaler("foo") scales, unscales, skips steps with inf/NaN gradients and
adjusts its scale exactly as GradScaler("cpu") does."""

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_foo

DEVICE = "foo"
LOW = [torch.float16, torch.bfloat16]
TOL = {torch.float16: {"atol": 1e-2, "rtol": 1e-2}, torch.bfloat16: {"atol": 5e-2, "rtol": 5e-2}}


def pair(*shape, seed=0):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return x, x.to(DEVICE)


def test_supported_dtypes():
    assert torch.foo.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.amp.is_autocast_available(DEVICE)
    assert torch.get_autocast_dtype(DEVICE) == torch.float16


@pytest.mark.parametrize("dtype", LOW)
def test_matmuls_and_convolutions_run_in_lower_precision(dtype, device):
    a_cpu, a = pair(8, 16)
    w_cpu, w = pair(4, 16, seed=1)
    img_cpu, img = pair(2, 3, 8, 8, seed=2)
    k_cpu, k = pair(5, 3, 3, 3, seed=3)
    with torch.autocast(DEVICE, dtype=dtype):
        results = {
            "mm": torch.mm(a.to(device), w.to(device).t()),
            "linear": F.linear(a.to(device), w.to(device)),
            "matmul": a.to(device) @ w.to(device).t(),
            "conv2d": F.conv2d(img.to(device), k.to(device)),
        }
    expected = {
        "mm": torch.mm(a_cpu.to(dtype), w_cpu.to(dtype).t()),
        "linear": F.linear(a_cpu.to(dtype), w_cpu.to(dtype)),
        "matmul": a_cpu.to(dtype) @ w_cpu.to(dtype).t(),
        "conv2d": F.conv2d(img_cpu.to(dtype), k_cpu.to(dtype)),
    }
    for name, result in results.items():
        assert result.dtype == dtype and result.device == device, name
        assert_close(result.cpu(), expected[name], **TOL[dtype], msg=name)


@pytest.mark.parametrize("dtype", LOW)
def test_precision_sensitive_ops_run_in_float32(dtype):
    ops = {
        "softmax": lambda h, t: torch.softmax(h, dim=1),
        "log_softmax": lambda h, t: F.log_softmax(h, dim=1),
        "exp": lambda h, t: torch.exp(h),
        "sum": lambda h, t: torch.sum(h),
        "layer_norm": lambda h, t: F.layer_norm(h, (10,)),
        "mse_loss": F.mse_loss,
    }
    x_cpu, x = pair(6, 10)
    t_cpu, t = pair(6, 10, seed=1)
    with torch.autocast(DEVICE, dtype=dtype):
        h = x.to(dtype)  # a low-precision activation, as a matmul would produce
        results = {name: op(h, t) for name, op in ops.items()}
    h_cpu = x_cpu.to(dtype).float()
    for name, result in results.items():
        assert result.dtype == torch.float32, name
        assert_close(result.cpu(), ops[name](h_cpu, t_cpu), msg=name)


def test_promote_ops_use_the_widest_input_type():
    _, a = pair(4, 4)
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.addcmul(a, a.half(), a.half()).dtype == torch.float32
        assert torch.cat([a.half(), a.half()]).dtype == torch.float16  # not a promote op: unchanged
        assert torch.mm(a.double(), a.double()).dtype == torch.float64  # float64 is never autocast
        assert (a.half() + 1).dtype == torch.float16  # no policy: runs as given


def test_disabled_region_and_nesting():
    _, a = pair(4, 4)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        assert torch.mm(a, a).dtype == torch.bfloat16
        with torch.autocast(DEVICE, enabled=False):
            assert torch.mm(a, a).dtype == torch.float32
        with torch.autocast(DEVICE, dtype=torch.float16):
            assert torch.mm(a, a).dtype == torch.float16
        assert torch.mm(a, a).dtype == torch.bfloat16
    assert torch.mm(a, a).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):  # another device's autocast leaves ours alone
        assert torch.mm(a, a).dtype == torch.float32


def test_unsupported_dtype_warns_and_disables_autocast():
    _, a = pair(4, 4)
    with pytest.warns(UserWarning, match="not supported. Disabling autocast"):
        with torch.autocast(DEVICE, dtype=torch.float32):
            assert torch.mm(a.half(), a.half()).dtype == torch.float16
            assert torch.softmax(a.half(), 0).dtype == torch.float16


def test_binary_cross_entropy_is_refused_and_the_logits_version_works():
    _, p = pair(4)
    target = torch.rand(4, device=DEVICE)
    with torch.autocast(DEVICE):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(torch.sigmoid(p), target)
        loss = F.binary_cross_entropy_with_logits(p, target)
    assert loss.dtype == torch.float32
    assert_close(loss.cpu(), F.binary_cross_entropy_with_logits(p.cpu(), target.cpu()))


def test_autocast_backward_gives_float32_gradients_close_to_cpu(device):
    torch.manual_seed(0)
    model_cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    model = copy.deepcopy(model_cpu).to(device)
    x_cpu, x = pair(8, 16)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        out = model(x.to(device))
        loss = F.cross_entropy(out, torch.arange(8, device=device) % 4)
    assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    F.cross_entropy(model_cpu(x_cpu), torch.arange(8) % 4).backward()
    assert_close(loss.cpu(), F.cross_entropy(model_cpu(x_cpu), torch.arange(8) % 4), atol=3e-2, rtol=3e-2)
    for p_cpu, p in zip(model_cpu.parameters(), model.parameters(), strict=True):
        assert p.grad.dtype == torch.float32
        assert_close(p.grad.cpu(), p_cpu.grad, atol=3e-2, rtol=5e-2)


def run_scaled_training(device, steps, poison, dtype=None):
    """A GradScaler training loop on `device`; gradients are poisoned with inf/NaN at some steps.
    Returns the scale after each step and the final parameters."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0**10, growth_interval=3)
    g = torch.Generator().manual_seed(1)
    scales = []
    for step in range(steps):
        x = torch.randn(16, 8, generator=g).to(device)
        y = torch.randn(16, 4, generator=g).to(device)
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        if step in poison:
            model.weight.grad[0, 0] = poison[step]
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, [p.detach().cpu() for p in model.parameters()]


def test_grad_scaler_matches_cpu_including_skipped_steps(device):
    poison = {2: float("inf"), 3: float("nan"), 8: float("-inf")}
    scales, params = run_scaled_training(device, 12, poison)
    scales_cpu, params_cpu = run_scaled_training(torch.device("cpu"), 12, poison)
    assert scales == scales_cpu
    assert scales[2] == scales[1] / 2 and scales[3] == scales[2] / 2  # backoff after inf and NaN
    assert scales[6] == 2 * scales[5]  # growth after growth_interval clean steps
    for p, p_cpu in zip(params, params_cpu, strict=True):
        assert_close(p, p_cpu)


def test_grad_scaler_step_is_skipped_on_inf(device):
    model = torch.nn.Linear(4, 1).to(device)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler(DEVICE)
    scaler.scale(model(torch.ones(2, 4, device=device)).sum()).backward()
    model.bias.grad.fill_(float("nan"))
    assert scaler.step(opt) is None  # skipped: the optimizer did not run
    scaler.update()
    for b, p in zip(before, model.parameters(), strict=True):
        assert torch.equal(b.cpu(), p.detach().cpu())
    assert scaler.get_scale() == 2.0**15


def test_unscale_and_update_are_native_kernels(device):
    grads = [torch.tensor([1.0, 2.0], device=device), torch.tensor([4.0], device=device, dtype=torch.float16)]
    found_inf = torch.zeros(1, device=device)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch.full((1,), 0.5, device=device))
    assert grads[0].cpu().tolist() == [0.5, 1.0] and grads[1].cpu().tolist() == [2.0]
    assert found_inf.item() == 0.0
    grads[0][1] = float("inf")
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch.ones(1, device=device))
    assert found_inf.item() == 1.0
    scale, tracker = torch.full((1,), 8.0, device=device), torch.zeros(1, dtype=torch.int32, device=device)
    torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 2)
    assert scale.item() == 4.0 and tracker.item() == 0
    found_inf.zero_()
    for expected_scale, expected_tracker in [(4.0, 1), (8.0, 0)]:
        torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 2)
        assert (scale.item(), tracker.item()) == (expected_scale, expected_tracker)
    ops = torch_foo.fallback_ops()
    assert "aten::_amp_foreach_non_finite_check_and_unscale_" not in ops
    assert "aten::_amp_update_scale_" not in ops


def test_scaler_kernels_reject_bad_arguments():
    grads = [torch.ones(2, device=DEVICE)]
    with pytest.raises(RuntimeError, match="found_inf must be a"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            grads, torch.zeros(1, device=DEVICE, dtype=torch.float64), torch.ones(1, device=DEVICE)
        )
    with pytest.raises(RuntimeError, match="1-element"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            grads, torch.zeros(2, device=DEVICE), torch.ones(1, device=DEVICE)
        )
    with pytest.raises(RuntimeError, match="floating point"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            [torch.ones(2, device=DEVICE, dtype=torch.int64)],
            torch.zeros(1, device=DEVICE),
            torch.ones(1, device=DEVICE),
        )
    assert grads[0].cpu().tolist() == [1.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.amp.GradScaler(DEVICE)  # no "device not available" warning

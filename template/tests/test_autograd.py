"""Autograd on the device: gradients of native and fallback operators, and a small model's
forward and backward pass, equal to the same computation on the CPU."""

import copy

import torch
from torch.testing import assert_close


def test_gradients_of_native_and_fallback_ops(device):
    a_cpu = torch.randn(4, 3, requires_grad=True)
    b_cpu = torch.randn(3, requires_grad=True)
    a = a_cpu.detach().to(device).requires_grad_()
    b = b_cpu.detach().to(device).requires_grad_()

    def f(x, y):
        return ((x * y + x / (y.abs() + 1) - 2 * y).sin() ** 2).sum()

    f(a, b).backward()
    f(a_cpu, b_cpu).backward()
    assert a.grad.device == device and b.grad.device == device
    assert_close(a.grad.cpu(), a_cpu.grad)
    assert_close(b.grad.cpu(), b_cpu.grad)


def test_small_model_forward_and_backward_match_cpu(device):
    torch.manual_seed(0)
    model_cpu = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)
    )
    model = copy.deepcopy(model_cpu).to(device)
    x = torch.randn(5, 8)
    target = torch.randint(0, 3, (5,))

    loss_cpu = torch.nn.functional.cross_entropy(model_cpu(x), target)
    loss_cpu.backward()
    loss = torch.nn.functional.cross_entropy(model(x.to(device)), target.to(device))
    loss.backward()

    assert_close(loss.cpu(), loss_cpu)
    for (name, p_cpu), p in zip(model_cpu.named_parameters(), model.parameters(), strict=True):
        assert p.grad.device == device, name
        assert_close(p.grad.cpu(), p_cpu.grad, msg=name)


def test_optimizer_step_matches_cpu(device):
    torch.manual_seed(1)
    model_cpu = torch.nn.Linear(6, 2)
    model = copy.deepcopy(model_cpu).to(device)
    opt_cpu = torch.optim.SGD(model_cpu.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(10, 6), torch.randn(10, 2)
    for _ in range(3):
        for m, o, xs, ys in ((model_cpu, opt_cpu, x, y), (model, opt, x.to(device), y.to(device))):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(xs), ys).backward()
            o.step()
    for p_cpu, p in zip(model_cpu.parameters(), model.parameters(), strict=True):
        assert_close(p.detach().cpu(), p_cpu.detach())

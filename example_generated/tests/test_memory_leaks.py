"""No leaks: after each heavy workload (a training loop, multi-stream work with record_stream,
pinned transfers, copies between devices) the memory held by tensors is back where it started.
conftest.py checks the same for the whole suite."""

import gc

import pytest
import torch


def training(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data, target = torch.randn(64, 32, device=device), torch.randn(64, 4, device=device)
    for _ in range(20):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(data), target).backward()
        optimizer.step()
    assert torch.isfinite(model(data)).all().item()


def streams(device):
    side = torch.foo.Stream(device)
    for _ in range(20):
        x = torch.randn(256, 256, device=device)
        side.wait_stream(torch.foo.current_stream(device))
        with torch.foo.stream(side):
            y = x * 2 + 1
        x.record_stream(side)
        del x
        torch.foo.current_stream(device).wait_stream(side)
        y.record_stream(torch.foo.current_stream(device))
        assert y.sum().item() != 0
    torch.foo.synchronize(device)


def pinned_transfers(device):
    for size in (1 << 10, 1 << 16, 1 << 20):
        host = torch.randn(size).pin_memory()
        on_device = host.to(device, non_blocking=True)
        back = torch.empty(size, pin_memory=True)
        back.copy_(on_device, non_blocking=True)
        torch.foo.synchronize(device)
        assert torch.equal(back, host)


def between_devices(device):
    other = torch.device("foo", (device.index + 1) % torch.foo.device_count())
    x = torch.randn(1000, 100, device=device)
    for _ in range(10):
        x = x.to(other).t().contiguous().t().to(device) + 1
    assert x.shape == (1000, 100)


@pytest.mark.parametrize("workload", [training, streams, pinned_transfers, between_devices])
def test_allocated_memory_returns_to_its_starting_value(device, workload):
    gc.collect()
    before = torch.foo.memory_allocated(device)
    workload(device)
    gc.collect()
    assert torch.foo.memory_allocated(device) == before

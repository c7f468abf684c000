"""Pinned host memory: tensor.pin_memory(), is_pinned(), non_blocking copies in both directions,
and the DataLoader with pin_memory=True (foo is the accelerator)."""

import pytest
import torch
from torch.testing import assert_close
from torch.utils.data import DataLoader, TensorDataset

SLEEP_US = 200_000


def test_pin_memory_and_is_pinned():
    x = torch.randn(1000)
    assert not x.is_pinned()
    pinned = x.pin_memory()
    assert pinned.is_pinned() and pinned.device.type == "cpu"
    assert_close(pinned, x)
    assert pinned[10:20].is_pinned()  # views of pinned memory are pinned
    assert torch.empty(10, pin_memory=True).is_pinned()
    assert not torch.ones(2, device="foo").cpu().is_pinned()


def test_non_blocking_copies_in_both_directions(device):
    source = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    on_device = source.to(device, non_blocking=True)
    back = torch.empty(1 << 20, pin_memory=True)
    back.copy_(on_device, non_blocking=True)
    torch.foo.synchronize(device)
    assert torch.equal(back, source)


def test_non_blocking_device_to_host_copy_is_asynchronous(device):
    with torch.foo.device(device):
        x = torch.full((1000,), 7.0, device=device)
        host = torch.zeros(1000, pin_memory=True)
        torch.foo._sleep(SLEEP_US)
        host.copy_(x, non_blocking=True)
        assert host.sum().item() == 0  # the copy waits behind the sleep: synchronise before reading
        torch.foo.current_stream().synchronize()
        assert_close(host, torch.full((1000,), 7.0))


def test_copies_with_pageable_memory_are_complete_on_return(device):
    with torch.foo.device(device):
        x = torch.full((1000,), 7.0, device=device)
        host = torch.zeros(1000)
        torch.foo._sleep(SLEEP_US // 4)
        host.copy_(x, non_blocking=True)  # pageable: non_blocking cannot apply
        assert_close(host, torch.full((1000,), 7.0))


@pytest.mark.parametrize("numel", [1, 1 << 10, 1 << 14, 1 << 16, (1 << 16) + 1])
def test_a_non_blocking_copy_from_pageable_memory_may_reuse_it_at_once(device, numel):
    # The runtime may stage the bytes (OpenCL does up to 256 KiB) and copy them in the stream's order.
    with torch.foo.device(device):
        torch.foo._sleep(SLEEP_US // 4)
        moved = []
        host = torch.empty(numel)
        for value in range(20):  # more copies than the driver keeps staging buffers
            host.fill_(float(value))
            moved.append(host.to(device, non_blocking=True))
        host.fill_(-1.0)
        for value, on_device in enumerate(moved):
            assert_close(on_device.cpu(), torch.full((numel,), float(value)))


def test_a_pinned_block_is_not_reused_before_its_copy_ran(device):
    pinned = torch.full((1 << 16,), 1.0).pin_memory()
    address = pinned.data_ptr()
    with torch.foo.device(device):
        torch.foo._sleep(SLEEP_US)
        on_device = pinned.to(device, non_blocking=True)
        del pinned
        other = torch.empty(1 << 16).pin_memory()
        assert other.data_ptr() != address  # still the source of a pending copy
        other.fill_(2.0)
        assert_close(on_device.cpu(), torch.ones(1 << 16))


def test_dataloader_pins_batches():
    data = TensorDataset(torch.arange(64.0).reshape(16, 4), torch.arange(16))
    moved = []
    for x, y in DataLoader(data, batch_size=4, pin_memory=True):
        assert x.is_pinned() and y.is_pinned()
        moved.append(x.to("foo", non_blocking=True))
    torch.foo.synchronize()
    assert_close(torch.cat(moved).cpu(), data.tensors[0])


def test_dataloader_with_worker_processes_and_pinning():
    torch.ones(1, device="foo")  # the runtime is initialised before the workers are forked
    data = TensorDataset(torch.arange(64.0).reshape(16, 4))
    loader = DataLoader(data, batch_size=4, pin_memory=True, num_workers=2)
    batches = [batch.to("foo", non_blocking=True) for (batch,) in loader]
    torch.foo.synchronize()
    assert_close(torch.cat(batches).cpu(), data.tensors[0])


def test_host_cache_can_be_emptied():
    torch.empty(1 << 20, pin_memory=True)
    torch.accelerator.empty_host_cache()
    assert torch.empty(1 << 20, pin_memory=True).is_pinned()

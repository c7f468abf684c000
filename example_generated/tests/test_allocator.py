"""Device memory: the caching allocator (reuse per stream, record_stream, empty_cache),
its statistics through torch.foo and torch.accelerator, capacity and out-of-memory errors."""

import pytest
import torch

MiB = 1 << 20
SLEEP_US = 200_000


def test_allocation_statistics(device):
    torch.accelerator.reset_peak_memory_stats(device)
    before = torch.accelerator.memory_allocated(device)
    x = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    assert torch.accelerator.memory_allocated(device) >= before + (1 << 20)
    assert torch.accelerator.max_memory_allocated(device) >= before + (1 << 20)
    stats = torch.accelerator.memory_stats(device)
    assert stats["allocation.all.current"] >= 1
    del x
    assert torch.accelerator.memory_allocated(device) == before
    assert torch.accelerator.max_memory_allocated(device) >= before + (1 << 20)


def test_device_module_and_accelerator_report_the_same(device):
    x = torch.empty(3 * MiB, dtype=torch.uint8, device=device)
    ours, theirs = torch.foo.memory_stats(device), torch.accelerator.memory_stats(device)
    assert ours == {key: theirs[key] for key in ours}
    for name in ("allocated_bytes.all.current", "reserved_bytes.large_pool.peak", "num_alloc_retries", "num_ooms"):
        assert name in ours
    assert torch.foo.memory_allocated(device) == torch.accelerator.memory_allocated(device)
    assert torch.foo.memory_reserved(device) == torch.accelerator.memory_reserved(device)
    assert torch.foo.memory_reserved(device) >= torch.foo.memory_allocated(device) >= 3 * MiB
    assert torch.foo.mem_get_info(device) == torch.accelerator.get_memory_info(device)
    assert torch.foo.memory_allocated(device.index) == torch.foo.memory_allocated(str(device))
    del x


def test_peak_statistics_reset(device):
    torch.foo.reset_peak_memory_stats(device)
    base = torch.foo.memory_allocated(device)
    x = torch.empty(8 * MiB, dtype=torch.uint8, device=device)
    assert torch.foo.max_memory_allocated(device) >= base + 8 * MiB
    assert torch.foo.max_memory_reserved(device) >= torch.foo.memory_reserved(device)
    del x
    torch.foo.reset_peak_memory_stats(device)
    assert torch.foo.max_memory_allocated(device) == torch.foo.memory_allocated(device) == base
    torch.foo.reset_accumulated_memory_stats(device)
    assert torch.foo.memory_stats(device)["allocation.all.allocated"] == 0


def test_freed_memory_is_reused_on_the_same_stream(device):
    x = torch.empty(5 * MiB, dtype=torch.uint8, device=device)
    address = x.data_ptr()
    segments = torch.foo.memory_stats(device)["num_device_alloc"]
    del x
    y = torch.empty(5 * MiB, dtype=torch.uint8, device=device)  # from the cache, no new segment
    assert y.data_ptr() == address
    assert torch.foo.memory_stats(device)["num_device_alloc"] == segments


def test_other_streams_do_not_get_a_freed_block(device):
    x = torch.empty(5 * MiB, dtype=torch.uint8, device=device)
    address = x.data_ptr()
    del x
    with torch.foo.stream(torch.foo.Stream(device)):
        y = torch.empty(5 * MiB, dtype=torch.uint8, device=device)
    assert y.data_ptr() != address  # the default stream may still be using it


def test_record_stream_delays_reuse(device):
    x = torch.ones(MiB, device=device)  # allocated on the default stream
    address = x.data_ptr()
    side = torch.foo.Stream(device)
    side.wait_stream(torch.foo.current_stream(device))
    with torch.foo.stream(side):
        torch.foo._sleep(SLEEP_US)
        y = x * 2  # x is read on the side stream, after the sleep
    x.record_stream(side)
    del x
    z = torch.empty(MiB, device=device)
    assert z.data_ptr() != address  # the side stream has not read x yet
    side.synchronize()
    torch.testing.assert_close(y.cpu(), torch.full((MiB,), 2.0))
    del z
    a, b = torch.empty(MiB, device=device), torch.empty(MiB, device=device)
    assert address in (a.data_ptr(), b.data_ptr())  # reusable once the side stream is done


def test_empty_cache_returns_memory_to_the_device(device):
    torch.foo.empty_cache()
    free_before, _ = torch.foo.mem_get_info(device)
    x = torch.empty(64 * MiB, dtype=torch.uint8, device=device)
    del x
    assert torch.foo.memory_reserved(device) - torch.foo.memory_allocated(device) >= 64 * MiB
    assert torch.foo.mem_get_info(device)[0] <= free_before - 64 * MiB  # still held by the cache
    torch.foo.empty_cache()
    assert torch.foo.memory_reserved(device) - torch.foo.memory_allocated(device) < 64 * MiB
    assert torch.foo.mem_get_info(device)[0] == free_before
    torch.accelerator.empty_cache()


def test_memory_info(device):
    free, total = torch.accelerator.get_memory_info(device)
    assert 0 < free <= total == torch.foo.get_device_properties(device).total_memory


@pytest.mark.emulated_driver("device memory size set by FOO_DEVICE_MEMORY")
def test_out_of_memory_is_a_python_exception(run_python):
    code = """
        import torch, torch_foo
        keep = torch.empty(3 << 20, dtype=torch.uint8, device="foo")
        try:
            torch.empty(2 << 20, dtype=torch.uint8, device="foo")
        except torch.OutOfMemoryError as error:
            print("OOM:", error)
        print("still working:", (torch.ones(4, device="foo") * 2).sum().item())
        print("ooms:", torch.foo.memory_stats()["num_ooms"])
    """
    result = run_python(code, FOO_DEVICE_MEMORY="4M")
    assert result.returncode == 0, result.stderr
    assert "OOM: foo out of memory. Tried to allocate 2.00 MiB on device foo:0" in result.stdout
    assert "total capacity of 4.00 MiB" in result.stdout
    assert "still working: 8.0" in result.stdout
    assert "ooms: 1" in result.stdout


@pytest.mark.emulated_driver("device memory size set by FOO_DEVICE_MEMORY")
def test_the_cache_is_emptied_before_out_of_memory(run_python):
    code = """
        import torch, torch_foo
        MiB = 1 << 20
        keep = torch.empty(4 * MiB, dtype=torch.uint8, device="foo")
        cached = torch.empty(3 * MiB, dtype=torch.uint8, device="foo")
        del cached  # 3 MiB stay reserved in the cache
        print("reserved:", torch.foo.memory_reserved() // MiB)
        more = torch.empty(3 * MiB + 1, dtype=torch.uint8, device="foo")  # needs the cached memory
        stats = torch.foo.memory_stats()
        print("retries:", stats["num_alloc_retries"], "device frees:", stats["num_device_free"])
        try:
            torch.empty(MiB, dtype=torch.uint8, device="foo")
        except torch.OutOfMemoryError as error:
            print("OOM:", error)
        del more
        print("after freeing:", (torch.ones(4, device="foo") + 1).sum().item())
    """
    result = run_python(code, FOO_DEVICE_MEMORY="8M")
    assert result.returncode == 0, result.stderr
    assert "reserved: 7" in result.stdout
    assert "retries: 1 device frees: 1" in result.stdout
    assert "OOM: foo out of memory. Tried to allocate 1.00 MiB on device foo:0" in result.stdout
    assert "PyTorch holds 8.00 MiB in tensors" in result.stdout
    assert "after freeing: 8.0" in result.stdout


def test_an_allocation_larger_than_the_device_is_out_of_memory(device):
    """Any driver: more than the device's memory raises torch.OutOfMemoryError, and the device keeps
    working (the emulated device's small memory sizes are tested above)."""
    too_large = torch.foo.get_device_properties(device).total_memory + (1 << 30)
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.empty(too_large, dtype=torch.uint8, device=device)
    assert (torch.ones(4, device=device) * 2).sum().item() == 8.0


def test_invalid_device_in_memory_apis_raises():
    with pytest.raises(RuntimeError, match="Invalid foo device index"):
        torch.accelerator.memory_allocated(99)
    with pytest.raises(RuntimeError, match="Invalid foo device index"):
        torch.foo.memory_stats(99)
    with pytest.raises(ValueError, match="Expected a foo device"):
        torch.foo.memory_allocated("cpu")

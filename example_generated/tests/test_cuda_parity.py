"""torch.foo against torch.cuda: code ported from CUDA by replacing the device name finds every
public name of torch.cuda, with CUDA's signature and behaviour, except those listed with a reason
in torch_foo/_cuda_parity.py. The behaviour tests do what such code does."""

import ctypes
import inspect
import os
import time
import warnings

import pytest
import torch
from numerics import DRIVER

import torch_foo
from torch_foo import _version
from torch_foo._cuda_parity import NOT_PROVIDED, PARAMETERS_SINCE, SINCE

MiB = 1 << 20


def cuda_public_names() -> set[str]:
    """torch.cuda's public API: its __all__, plus the torch classes and functions and the torch.cuda
    submodules it exposes beside it (torch.OutOfMemoryError, torch.cuda.gds), not its imports."""
    names = set(torch.cuda.__all__)
    for name in dir(torch.cuda):
        value = getattr(torch.cuda, name)
        if name.startswith("_"):
            continue
        if inspect.ismodule(value):
            if value.__name__.startswith("torch.cuda."):
                names.add(name)
        elif inspect.isclass(value) or inspect.isfunction(value):
            module = getattr(value, "__module__", "") or ""
            if module == "torch" or module.startswith("torch.cuda"):
                names.add(name)
    return names


def test_every_public_name_of_torch_cuda_is_provided_or_listed():
    missing = sorted(cuda_public_names() - set(dir(torch.foo)) - set(NOT_PROVIDED))
    assert not missing, (
        f"torch.cuda names missing from torch.foo: {missing}; implement them or list them with a "
        "reason in torch_foo/_cuda_parity.py"
    )


def test_listed_names_are_cuda_names_this_module_lacks():
    provided = sorted(name for name in NOT_PROVIDED if hasattr(torch.foo, name))
    assert not provided, f"listed as not provided but present: {provided}"
    later = {name for name, release in SINCE.items() if _version.running()[:2] < release}
    gone = sorted(set(NOT_PROVIDED) - cuda_public_names() - later)
    assert not gone, f"listed but no longer in torch.cuda: {gone}"
    assert all(reason.strip() for _, reason in NOT_PROVIDED.values())


def test_shared_functions_and_classes_take_cudas_parameters():
    different = {}
    for name in sorted(cuda_public_names() & set(dir(torch.foo))):
        theirs, ours = getattr(torch.cuda, name), getattr(torch.foo, name)
        if ours is theirs or not callable(theirs) or inspect.ismodule(theirs):
            continue
        try:
            expected = list(inspect.signature(theirs).parameters)
        except (TypeError, ValueError):
            continue  # a builtin without a signature
        release = _version.running()[:2]
        later = {parameter for parameter, since in PARAMETERS_SINCE.get(name, {}).items() if release < since}
        actual = [parameter for parameter in inspect.signature(ours).parameters if parameter not in later]
        if expected != actual:
            different[name] = (expected, actual)
    assert not different, f"parameters differ from torch.cuda's (cuda, ours): {different}"


# ---- memory ----------------------------------------------------------------------------------


def test_memory_fraction_makes_an_allocation_fail_cleanly_then_succeed():
    total = torch.foo.get_device_properties(0).total_memory
    assert torch.foo.get_per_process_memory_fraction(0) == 1.0
    torch.foo.empty_cache()
    fraction = (torch.foo.memory_reserved(0) + 32 * MiB) / total
    try:
        torch.foo.set_per_process_memory_fraction(fraction, 0)
        assert torch.foo.get_per_process_memory_fraction(0) == pytest.approx(fraction)
        small = torch.ones(4 * MiB, dtype=torch.uint8, device="foo:0")  # within the limit
        ooms = torch.foo.memory_stats(0)["num_ooms"]
        with pytest.raises(torch.OutOfMemoryError, match="set_per_process_memory_fraction"):
            torch.empty(64 * MiB, dtype=torch.uint8, device="foo:0")
        assert torch.foo.memory_stats(0)["num_ooms"] == ooms + 1
        assert small.sum().item() == 4 * MiB  # the process goes on working
        torch.foo.set_per_process_memory_fraction(1.0, 0)
        big = torch.empty(64 * MiB, dtype=torch.uint8, device="foo:0")
        assert big.numel() == 64 * MiB
    finally:
        torch.foo.set_per_process_memory_fraction(1.0, 0)
    with pytest.raises(ValueError, match="Allowed range"):
        torch.foo.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError):
        torch.foo.set_per_process_memory_fraction("half")


def test_nested_memory_stats_have_cudas_shape(device):
    x = torch.empty(2 * MiB, dtype=torch.uint8, device=device)
    nested = torch.foo.memory_stats_as_nested_dict(device)
    pooled = (
        "allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
        "active_bytes", "inactive_split_bytes", "requested_bytes",
    )  # fmt: skip
    counts = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free")
    assert set(nested) == {*pooled, *counts, "max_split_size", "oversize_allocations", "oversize_segments"}
    columns = {"current", "peak", "allocated", "freed"}
    for name in pooled:
        assert set(nested[name]) == {"all", "small_pool", "large_pool"}
        assert all(set(nested[name][pool]) == columns for pool in nested[name])
    assert set(nested["oversize_allocations"]) == set(nested["oversize_segments"]) == columns
    assert nested["max_split_size"] == -1  # no limit, as CUDA reports when it is unset
    assert nested["allocated_bytes"]["all"]["current"] >= 2 * MiB
    flat = torch.foo.memory_stats(device)
    assert flat["allocated_bytes.large_pool.current"] == nested["allocated_bytes"]["large_pool"]["current"]
    del x


def test_peak_resets_and_their_deprecated_aliases(device):
    x = torch.empty(8 * MiB, dtype=torch.uint8, device=device)
    del x
    assert torch.foo.max_memory_allocated(device) >= torch.foo.memory_allocated(device) + 8 * MiB
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        torch.foo.reset_max_memory_allocated(device)
    assert torch.foo.max_memory_allocated(device) == torch.foo.memory_allocated(device)
    y = torch.empty(8 * MiB, dtype=torch.uint8, device=device)
    del y
    torch.foo.empty_cache()
    with pytest.warns(FutureWarning):
        torch.foo.reset_max_memory_cached(device)
    assert torch.foo.max_memory_reserved(device) == torch.foo.memory_reserved(device)
    with pytest.warns(FutureWarning, match="memory_reserved"):
        assert torch.foo.memory_cached(device) == torch.foo.memory_reserved(device)
    with pytest.warns(FutureWarning, match="max_memory_reserved"):
        assert torch.foo.max_memory_cached(device) == torch.foo.max_memory_reserved(device)


def test_host_memory_stats_move_when_pinning_memory():
    # Pinned blocks that earlier tests freed while a stream used them are released when their events
    # are processed, at the next pinning: settle them first, or they move the counts under this test.
    torch.accelerator.synchronize()
    torch.accelerator.empty_host_cache()
    before = torch.foo.host_memory_stats()
    assert {"allocations.current", "active_bytes.peak", "num_host_alloc", "host_alloc_time.count"} <= set(before)
    pinned = torch.empty(3 * MiB, dtype=torch.uint8).pin_memory()
    during = torch.foo.host_memory_stats()
    assert during["active_requests.current"] == before["active_requests.current"] + 1
    assert during["active_bytes.current"] >= before["active_bytes.current"] + 3 * MiB
    assert during["allocated_bytes.current"] >= 3 * MiB
    del pinned
    after = torch.foo.host_memory_stats()
    assert after["active_requests.current"] == before["active_requests.current"]
    assert after["active_bytes.peak"] >= before["active_bytes.current"] + 3 * MiB
    torch.foo.reset_peak_host_memory_stats()
    peaked = torch.foo.host_memory_stats()
    assert peaked["active_bytes.peak"] == peaked["active_bytes.current"]
    torch.foo.reset_accumulated_host_memory_stats()
    reset = torch.foo.host_memory_stats()
    assert reset["active_requests.allocated"] == reset["active_requests.freed"] == 0
    nested = torch.foo.host_memory_stats_as_nested_dict()
    assert nested["active_bytes"]["current"] == reset["active_bytes.current"]


def test_caching_allocator_alloc_and_delete_round_trip(device):
    before = torch.foo.memory_allocated(device)
    pointer = torch.foo.caching_allocator_alloc(MiB, device)
    assert isinstance(pointer, int) and pointer != 0
    assert torch.foo.memory_allocated(device) >= before + MiB
    side = torch.foo.Stream(device)
    on_side = torch.foo.caching_allocator_alloc(4096, device, side)
    assert on_side not in (0, pointer)
    torch.foo.caching_allocator_delete(on_side)
    torch.foo.caching_allocator_delete(pointer)
    assert torch.foo.memory_allocated(device) == before
    with pytest.raises(RuntimeError, match="invalid device pointer"):
        torch.foo.caching_allocator_delete(pointer)
    x = torch.ones(16, device=device)
    with pytest.raises(RuntimeError, match="invalid device pointer"):
        torch.foo.caching_allocator_delete(x.data_ptr())  # a tensor's memory is not ours to free
    assert x.sum().item() == 16
    with pytest.raises(TypeError, match="stream"):
        torch.foo.caching_allocator_alloc(16, device, stream=123)
    assert torch.foo.get_allocator_backend() == "native"


@pytest.mark.two_devices
def test_memory_summary_prints_the_allocator_statistics():
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="foo")
    summary = torch.foo.memory_summary()
    stats = torch.foo.memory_stats()
    assert "PyTorch foo memory summary, device ID 0" in summary
    for title in ("Allocated memory", "Requested memory", "Device reserved memory", "Allocations", "from large pool"):
        assert title in summary
    (allocations,) = [line for line in summary.splitlines() if line.startswith("| Allocations ")]
    assert allocations.split("|")[2].split()[0] == str(stats["allocation.all.current"])
    abbreviated = torch.foo.memory_summary(device=1, abbreviated=True)
    assert "device ID 1" in abbreviated and "from large pool" not in abbreviated
    assert torch.foo.memory.memory_summary is torch.foo.memory_summary
    del x


# ---- streams ---------------------------------------------------------------------------------


def runtime_library() -> ctypes.CDLL:
    """The foo runtime's C API, as code outside PyTorch calls it (it is linked into torch_foo._C)."""
    library = ctypes.CDLL(torch_foo._C.__file__)
    for name in ("fooStreamCreate", "fooStreamDestroy", "fooSetDevice"):
        getattr(library, name).restype = ctypes.c_int
    return library


def test_external_stream_runs_work(device):
    runtime = runtime_library()
    handle = ctypes.c_void_p()
    assert runtime.fooSetDevice(device.index) == 0
    assert runtime.fooStreamCreate(ctypes.byref(handle)) == 0
    try:
        external = torch.foo.get_stream_from_external(handle.value, device)
        assert isinstance(external, torch.foo.ExternalStream) and isinstance(external, torch.Stream)
        assert external.native_handle == handle.value and external.device == device
        assert torch.foo.ExternalStream(handle.value, device) == external  # the same stream again
        x = torch.arange(1000.0, device=device)
        x * 2  # a driver that builds kernels on first use (OpenCL) builds this one now, not behind the sleep
        with torch.foo.stream(external):
            assert torch.foo.current_stream(device) == external
            torch.foo._sleep(50_000)
            y = x * 2
            done = external.record_event()
        assert not done.query()  # queued behind the sleep on the external stream
        external.synchronize()
        assert torch.equal(y.cpu(), torch.arange(1000.0) * 2)
    finally:
        torch.foo.synchronize(device)
        assert runtime.fooStreamDestroy(handle) == 0
    with pytest.raises(RuntimeError, match="is not a foo stream"):
        torch.foo.ExternalStream(0x1234, device)
    assert torch.foo.get_stream_from_external(0, device) == torch.foo.default_stream(device)


@pytest.fixture
def sync_debug_off():
    yield
    torch.foo.set_sync_debug_mode(0)


def test_sync_debug_mode_reports_copies_to_the_host_not_device_work(sync_debug_off):
    x = torch.arange(1000.0, device="foo")
    assert torch.foo.get_sync_debug_mode() == 0
    torch.foo.set_sync_debug_mode("warn")
    assert torch.foo.get_sync_debug_mode() == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # device work and asynchronous copies must not warn
        y = (x * 2).sum()
        pinned = torch.empty(1000, pin_memory=True)
        pinned.copy_(x, non_blocking=True)
    for synchronizing in (lambda: x.cpu(), lambda: y.item(), lambda: torch.foo.synchronize()):
        with pytest.warns(UserWarning, match="called a synchronizing foo operation"):
            synchronizing()
    torch.foo.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="called a synchronizing foo operation"):
        y.item()
    torch.foo.set_sync_debug_mode("default")
    assert y.item() == 999_000.0
    with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
        torch.foo.set_sync_debug_mode("loud")


# ---- devices and monitoring --------------------------------------------------------------------


def test_peer_access_is_a_driver_query():
    count = torch.foo.device_count()
    assert torch.foo.can_device_access_peer(0, 0) is False  # a device is not its own peer
    for peer in range(1, count):
        assert torch.foo.can_device_access_peer(0, peer) is True  # one address space
    with pytest.raises(RuntimeError, match="Invalid foo device index"):
        torch.foo.can_device_access_peer(0, count)


# The emulated device measures its own work and has no temperature, power or clock sensor; an OpenCL
# device reports no sensor at all (OpenCL has no query for them).
@pytest.mark.emulated_driver("sensors: utilisation measured over its own kernels")
def test_utilization_measures_kernels_over_the_window_since_the_last_call():
    torch.foo.utilization(0)  # starts a window
    torch.foo._sleep(200_000)
    torch.foo.synchronize(0)
    assert 50 <= torch.foo.utilization(0) <= 100
    time.sleep(0.2)
    assert torch.foo.utilization(0) <= 50


@pytest.mark.emulated_driver("sensors: memory bandwidth use measured over its own copies")
def test_memory_usage_measures_copies():
    x = torch.ones(64 * MiB, dtype=torch.uint8, device="foo")
    torch.foo.memory_usage()  # starts a window
    for _ in range(4):
        x.cpu()
    assert 0 < torch.foo.memory_usage() <= 100


@pytest.mark.emulated_driver("sensors: the ones it lacks")
def test_sensors_the_emulated_device_lacks_raise_clearly():
    for function, sensor in (
        (torch.foo.temperature, "temperature sensor"),
        (torch.foo.power_draw, "power sensor"),
        (torch.foo.clock_rate, "clock"),
    ):
        with pytest.raises(RuntimeError, match=sensor):
            function()


@pytest.mark.skipif(DRIVER != "opencl", reason="the OpenCL driver's sensors")
def test_an_opencl_device_has_no_sensors_and_says_so():
    for function in (
        torch.foo.utilization,
        torch.foo.memory_usage,
        torch.foo.temperature,
        torch.foo.power_draw,
        torch.foo.clock_rate,
    ):
        with pytest.raises(RuntimeError, match="OpenCL devices report no utilisation, temperature, power or clock"):
            function()


def test_device_memory_used_and_processes(device):
    x = torch.empty(4 * MiB, dtype=torch.uint8, device=device)
    free, total = torch.foo.mem_get_info(device)
    assert torch.foo.device_memory_used(device) == total - free >= 4 * MiB
    listing = torch.foo.list_gpu_processes(device).splitlines()
    assert listing[0] == f"GPU:{device.index}"
    assert any(line.startswith(f"process {os.getpid():>10d} uses") for line in listing[1:])
    del x


def test_reexports_and_tf32():
    assert torch.foo.OutOfMemoryError is torch.OutOfMemoryError
    assert torch.foo.is_tf32_supported() is False

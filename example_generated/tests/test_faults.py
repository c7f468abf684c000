"""Injected faults (FOO_FAULTS, csrc/runtime/emulated/faults.cpp): a failed allocation, copy, kernel
or event record reaches Python as a clear exception at the place a device would report it, the
process keeps working afterwards, and no device memory leaks. The runtime reads the variable once, at
start-up, so each test runs its program in a new interpreter. (A value that does not parse is
tested with the runtime alone, in tests/test_runtime.py.)"""

import json
import textwrap

import pytest

DEVICE = "foo"

pytestmark = pytest.mark.emulated_driver("fault injection (FOO_FAULTS)")

# Runs first in the child: `allocated()` is the device memory held by tensors, as the leak checks
# compare it; the child reports what it saw in `seen`.
PRELUDE = """
import json, torch, torch_foo

def allocated():
    return [torch.foo.memory_allocated(i) for i in range(torch.foo.device_count())]

seen = {}
"""


def observe(run_python, code: str, faults: str) -> dict:
    """Runs `code` after PRELUDE with FOO_FAULTS=`faults`; returns the child's `seen`."""
    program = PRELUDE + textwrap.dedent(code) + "\nprint(json.dumps(seen))\n"
    result = run_python(program, FOO_FAULTS=faults)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def injected(what: str, number: int, faults: str) -> str:
    return f"injected fault: {what} {number} failed (FOO_FAULTS={faults})"


def test_a_failed_allocation_is_out_of_memory_and_the_next_one_works(run_python):
    # Allocation 1 is the small pool's first segment; 2 is the 8 MiB segment, and 3 the caching
    # allocator's retry after freeing its cache: both fail, so the request raises.
    faults = "malloc:2-3"
    seen = observe(
        run_python,
        """
        before = allocated()
        small = torch.ones(4, device="foo")
        try:
            torch.empty(8 << 20, dtype=torch.uint8, device="foo")
        except torch.OutOfMemoryError as error:
            seen["error"] = str(error)
        stats = torch.foo.memory_stats()
        seen["ooms"], seen["retries"] = stats["num_ooms"], stats["num_alloc_retries"]
        big = torch.full((8 << 20,), 3, dtype=torch.uint8, device="foo")  # allocation 4
        seen["big"] = big.sum().item()
        del small, big
        seen["leaked"] = allocated() != before
        """,
        faults,
    )
    assert seen["error"].startswith("foo out of memory. Tried to allocate 8.00 MiB on device foo:0")
    assert seen["error"].endswith("The runtime said: " + injected("device allocation", 3, faults))
    assert (seen["ooms"], seen["retries"]) == (1, 1)
    assert seen["big"] == 3 * (8 << 20)
    assert not seen["leaked"]


def test_the_caching_allocator_absorbs_a_single_failed_allocation(run_python):
    seen = observe(
        run_python,
        """
        x = torch.arange(1000.0, device="foo") * 2
        seen["sum"] = x.sum().item()
        seen["retries"] = torch.foo.memory_stats()["num_alloc_retries"]
        """,
        "malloc:1",
    )
    assert seen == {"sum": 999000.0, "retries": 1}


def test_a_failed_copy_raises_at_the_copy_in_every_direction(run_python):
    # Copy 1 makes `on_device`; copies 2 to 5 are one attempt in each direction, all failing.
    faults = "memcpy:2-5"
    seen = observe(
        run_python,
        """
        on_device = torch.arange(6.0).to("foo")
        pinned = torch.arange(6.0).pin_memory()
        copies = {
            "to the device": lambda: torch.arange(6.0).to("foo"),
            "to the host": lambda: on_device.cpu(),
            "between devices": lambda: on_device.to("foo:1"),
            "pinned, non_blocking": lambda: pinned.to("foo", non_blocking=True),
        }
        before = allocated()
        for name, copy in copies.items():
            try:
                copy()
            except RuntimeError as error:
                seen[name] = str(error)
        seen["leaked"] = allocated() != before
        seen["again"] = [copy().cpu().tolist() for copy in copies.values()]
        """,
        faults,
    )
    prefix = "foo runtime error: unknown driver error: "
    assert seen["to the device"] == prefix + injected("copy", 2, faults)
    assert seen["to the host"] == prefix + injected("copy", 3, faults)
    assert seen["between devices"] == prefix + injected("copy", 4, faults)
    assert seen["pinned, non_blocking"] == prefix + injected("copy", 5, faults)
    assert not seen["leaked"]
    assert seen["again"] == [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]] * 4


def test_a_failed_kernel_is_reported_at_the_next_synchronisation(run_python):
    # Launch 1 is the fill of `x`; 2 (the add) and 5 (a multiplication) fail on the stream.
    faults = "kernel:2,kernel:5"
    seen = observe(
        run_python,
        """
        x = torch.ones(4, device="foo")
        before = allocated()
        y = x + 1  # launch 2: the call returns, the kernel fails on the stream
        try:
            torch.foo.synchronize()
        except RuntimeError as error:
            seen["synchronize"] = str(error)
        torch.foo.synchronize()  # reported once
        seen["after"] = (x * 3).cpu().tolist()  # launch 3, then a copy
        z = x * 4  # launch 4
        try:
            (z * 5).cpu()  # launch 5 fails: the copy that reads its result reports it
        except RuntimeError as error:
            seen["copy"] = str(error)
        seen["still"] = (z * 5).cpu().tolist()
        del y, z
        seen["leaked"] = allocated() != before
        """,
        faults,
    )
    assert seen["synchronize"] == (
        "foo runtime error: a kernel failed: kernel add: " + injected("kernel launch", 2, faults) + " (device 0)"
    )
    assert seen["after"] == [3.0] * 4
    assert "a kernel failed: kernel mul: " + injected("kernel launch", 5, faults) in seen["copy"]
    assert seen["still"] == [20.0] * 4
    assert not seen["leaked"]


def test_a_failed_event_record_raises_at_the_record_and_leaks_nothing(run_python):
    # Records 1 and 2 fail where Python asked for them. Record 4 is the allocator's own: freeing a
    # tensor used on another stream (record_stream) records an event there; when that fails, the
    # allocator waits for the stream instead, and the memory comes back all the same.
    faults = "event:1-2,event:4"
    seen = observe(
        run_python,
        """
        before = allocated()
        event = torch.foo.Event()
        try:
            event.record()
        except RuntimeError as error:
            seen["record"] = str(error)
        side = torch.foo.Stream()
        try:
            side.wait_stream(torch.foo.current_stream())
        except RuntimeError as error:
            seen["wait_stream"] = str(error)
        x = torch.ones(1 << 20, device="foo")
        side.wait_stream(torch.foo.current_stream())  # record 3
        with torch.foo.stream(side):
            y = x * 2
        x.record_stream(side)
        del x  # record 4 fails
        seen["sum"] = y.sum().item()
        del y
        event.record()  # record 5
        event.synchronize()
        seen["query"] = event.query()
        seen["leaked"] = allocated() != before
        """,
        faults,
    )
    assert seen["record"] == "foo runtime error: unknown driver error: " + injected("event record", 1, faults)
    assert injected("event record", 2, faults) in seen["wait_stream"]
    assert seen["sum"] == 2.0 * (1 << 20)
    assert seen["query"] is True
    assert not seen["leaked"]


def test_probabilistic_faults_repeat_with_their_seed(run_python):
    code = """
        failed = []
        for i in range(60):
            try:
                torch.ones(4).to("foo")
            except RuntimeError:
                failed.append(i)
        seen["failed"] = failed
        seen["leaked"] = allocated() != [0] * torch.foo.device_count()
        """
    first = observe(run_python, code, "memcpy:p=0.25,seed:7")
    again = observe(run_python, code, "memcpy:p=0.25,seed:7")
    assert 3 <= len(first["failed"]) <= 30, first
    assert first == again
    assert not first["leaked"]

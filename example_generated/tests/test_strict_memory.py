"""Strict memory mode: host code cannot read or write device memory (FOO_STRICT_MEMORY=1, which
conftest.py sets for this suite), so integration code that dereferences a device pointer crashes
in the tests instead of on hardware."""

import ctypes
import signal
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "sanitizers"))
import harness  # noqa: E402
from numerics import DRIVER  # noqa: E402


def permissions(address: int) -> str:
    """The permissions of the memory mapping that contains `address` ("rw-p", "---p", ...)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(part, 16) for part in span.split("-"))
            if start <= address < end:
                return perms
    return "unmapped"


def test_device_memory_is_inaccessible_in_this_suite(device):
    x = torch.ones(1024, device=device)
    assert permissions(x.data_ptr()).startswith("---")
    assert not torch.foo.get_device_properties(device).host_accesses_device_memory  # the driver says so
    assert permissions(torch.ones(1024).data_ptr()).startswith("rw")
    assert (x + 1).sum().item() == 2048  # the runtime and kernels still reach it


def test_host_access_to_device_memory_crashes_with_an_explanation(run_python):
    code = """
        import ctypes, torch, torch_foo
        x = torch.ones(4, device="foo")
        print("reading", flush=True)
        ctypes.string_at(x.data_ptr(), 4)
        print("read it")
    """
    result = run_python(code, FOO_STRICT_MEMORY="1", **harness.crash_environment())
    assert result.returncode == -signal.SIGSEGV
    assert "reading" in result.stdout and "read it" not in result.stdout
    if DRIVER == "emulated":  # its handler of the fault explains it; other drivers' addresses only fault
        assert "foo strict memory mode: host code read or wrote device memory directly" in result.stderr


@pytest.mark.emulated_driver("strict memory mode turned off (FOO_STRICT_MEMORY=0)")
def test_without_strict_mode_host_code_can_read_device_memory(run_python):
    code = """
        import ctypes, struct, torch, torch_foo
        x = torch.arange(4.0, device="foo")
        torch.foo.synchronize()
        print(list(struct.unpack("4f", ctypes.string_at(x.data_ptr(), 16))))
        print("host access:", torch.foo.get_device_properties(0).host_accesses_device_memory)
    """
    result = run_python(code, FOO_STRICT_MEMORY="0")
    assert result.returncode == 0, result.stderr
    assert "[0.0, 1.0, 2.0, 3.0]" in result.stdout
    assert "host access: True" in result.stdout


def test_pinned_memory_stays_host_memory():
    pinned = torch.arange(4, dtype=torch.int32).pin_memory()
    assert ctypes.string_at(pinned.data_ptr(), 4) == (0).to_bytes(4, "little")

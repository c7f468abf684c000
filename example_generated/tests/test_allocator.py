"""Device memory: statistics through torch.accelerator, capacity and out-of-memory errors."""

import subprocess
import sys
import textwrap

import pytest
import torch


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


def test_memory_info(device):
    free, total = torch.accelerator.get_memory_info(device)
    assert 0 < free <= total == torch.foo.get_device_properties(device).total_memory


def test_out_of_memory_is_a_python_exception():
    code = """
        import torch, torch_foo
        keep = torch.empty(3 << 20, dtype=torch.uint8, device="foo")
        try:
            torch.empty(2 << 20, dtype=torch.uint8, device="foo")
        except torch.OutOfMemoryError as error:
            print("OOM:", error)
        print("still working:", (torch.ones(4, device="foo") * 2).sum().item())
    """
    env = {"FOO_DEVICE_MEMORY": "4M", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **env},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "OOM: foo out of memory. Tried to allocate 2.00 MiB on device foo:0" in result.stdout
    assert "total capacity of 4.00 MiB" in result.stdout
    assert "still working: 8.0" in result.stdout


def test_invalid_device_in_memory_apis_raises():
    with pytest.raises(RuntimeError, match="Invalid foo device index"):
        torch.accelerator.memory_allocated(99)

"""Shared fixtures. Importing torch_foo here makes the tests independent of autoload."""

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

# Strict memory mode: host code cannot read or write device memory, so integration code that
# dereferences a device pointer crashes in these tests instead of on hardware. The runtime reads its
# configuration once, on its first call, which `import torch` can already make (autoload imports
# the backend, and the backend asks for the device count), so this comes before every import.
os.environ.setdefault("FOO_STRICT_MEMORY", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_foo  # noqa: E402,F401

DEVICE = "foo"


@pytest.fixture
def run_python():
    """run_python(code, script=None, **env) runs `code` (dedented) in a new interpreter with this
    process's environment updated by `env` (a None value removes a variable) and returns the
    CompletedProcess. The backend is not autoloaded unless env sets TORCH_DEVICE_BACKEND_AUTOLOAD="1".
    With `script` (a path), the code is written there and run as a file, which 'spawn' children need."""

    def run(code: str, script: Path | None = None, **env: str | None) -> subprocess.CompletedProcess:
        merged = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **env}
        environment = {name: value for name, value in merged.items() if value is not None}
        if script is None:
            command = [sys.executable, "-c", textwrap.dedent(code)]
        else:
            script.write_text(textwrap.dedent(code))
            command = [sys.executable, str(script)]
        return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)

    return run


@pytest.fixture(params=range(torch.foo.device_count()), ids=lambda i: f"{DEVICE}:{i}")
def device(request) -> torch.device:
    """Each foo device in turn."""
    return torch.device(DEVICE, request.param)


@pytest.fixture(autouse=True)
def _restore_current_device():
    """Tests may switch the current device or stream; the next test starts on device 0 and the
    default streams again."""
    yield
    for index in range(torch.foo.device_count()):
        torch.foo.set_stream(torch.foo.default_stream(index))
    torch.foo.set_device(0)


@pytest.fixture(scope="session", autouse=True)
def _no_device_memory_leaks():
    """Device memory held by tensors returns to its starting value after the whole suite (the
    caching allocator keeps freed blocks, but they no longer count as allocated). Keep device
    tensors out of module scope: they would count as a leak here."""
    devices = range(torch.foo.device_count())
    before = [torch.foo.memory_allocated(i) for i in devices]
    yield
    gc.collect()
    after = [torch.foo.memory_allocated(i) for i in devices]
    assert after == before, (
        f"device memory still allocated after the test suite (bytes per device): {before} -> {after}"
    )

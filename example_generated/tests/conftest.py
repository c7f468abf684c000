"""Shared fixtures. Importing torch_foo here makes the tests independent of autoload."""

import os

import pytest
import torch

import torch_foo  # noqa: F401

DEVICE = "foo"

# Strict memory mode: host code cannot read or write device memory, so integration code that
# dereferences a device pointer crashes in these tests instead of on hardware. The runtime reads
# the variable when a device is first used, which is after this line.
os.environ.setdefault("FOO_STRICT_MEMORY", "1")


@pytest.fixture(params=range(torch.foo.device_count()), ids=lambda i: f"{DEVICE}:{i}")
def device(request) -> torch.device:
    """Each foo device in turn."""
    return torch.device(DEVICE, request.param)


@pytest.fixture(autouse=True)
def _restore_current_device():
    """Tests may switch the current device; the next test starts on device 0 again."""
    yield
    torch.foo.set_device(0)

"""Shared fixtures. Importing torch_foo here makes the tests independent of autoload."""

import pytest
import torch

import torch_foo  # noqa: F401

DEVICE = "foo"


@pytest.fixture(params=range(torch.foo.device_count()), ids=lambda i: f"{DEVICE}:{i}")
def device(request) -> torch.device:
    """Each foo device in turn."""
    return torch.device(DEVICE, request.param)


@pytest.fixture(autouse=True)
def _restore_current_device():
    """Tests may switch the current device; the next test starts on device 0 again."""
    yield
    torch.foo.set_device(0)

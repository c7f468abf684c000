"""Several devices, as with CUDA: an operator that mixes two devices raises, copies between devices
work and are ordered with the work on both devices, and the host does not wait for them."""

import pytest
import torch
from torch.testing import assert_close

pytestmark = pytest.mark.two_devices

SLEEP_US = 200_000


def test_operators_mixing_devices_raise():
    a, b = torch.ones(3, device="foo:0"), torch.ones(3, device="foo:1")
    for op in (
        lambda: a + b,  # native kernel
        lambda: torch.maximum(a, b),  # CPU fallback
        lambda: torch.cat([a, b]),  # CPU fallback, tensor list
        lambda: a.add_(torch.ones(3)),  # a CPU tensor that is not a scalar
    ):
        with pytest.raises(RuntimeError, match="same device"):
            op()
    assert_close((a + torch.tensor(1.0)).cpu(), torch.full((3,), 2.0))  # CPU scalars are fine
    assert_close(a.cpu(), torch.ones(3))  # nothing changed


def test_copies_between_devices_follow_the_work_on_both():
    with torch.foo.device(0):
        source = torch.full((1000,), 3.0, device="foo:0")
        torch.foo._sleep(SLEEP_US)
        source.mul_(2)  # queued behind the sleep
    copy = source.to("foo:1")  # runs after mul_, on device 0's stream
    assert not torch.foo.current_stream(1).query()  # device 1 waits for the copy; the host did not
    with torch.foo.device(1):
        assert_close((copy + 1).cpu(), torch.full((1000,), 7.0))


def test_copy_into_a_tensor_that_the_destination_is_still_writing():
    target = torch.zeros(1000, device="foo:1")
    with torch.foo.device(1):
        torch.foo._sleep(SLEEP_US // 2)
        target.fill_(5)  # queued on device 1 before the copy below
    target.copy_(torch.ones(1000, device="foo:0"))  # must land after the fill
    with torch.foo.device(1):
        assert_close(target.cpu(), torch.ones(1000))


def test_tensors_follow_the_current_device():
    with torch.foo.device(1):
        assert torch.ones(1, device="foo").device == torch.device("foo:1")
        assert torch.foo.current_stream().device_index == 1

"""torch.accelerator with foo as the process's accelerator: identity, devices, streams,
synchronisation, memory and capability, in agreement with torch.foo."""

import pytest
import torch


def test_identity_and_devices():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("foo")
    assert torch.accelerator.device_count() == torch.foo.device_count()


@pytest.mark.two_devices
def test_device_index():
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1 == torch.foo.current_device()
    torch.accelerator.set_device_index(0)
    with torch.accelerator.device_index(1):
        assert torch.foo.current_device() == 1
        assert torch.ones(1, device="foo").device.index == 1
    assert torch.foo.current_device() == 0


@pytest.mark.two_devices
def test_streams_and_synchronize():
    stream = torch.foo.Stream("foo:1")
    assert torch.accelerator.current_stream(1) == torch.foo.default_stream(1)
    torch.accelerator.set_stream(stream)
    assert torch.foo.current_stream(1) == stream
    with torch.foo.stream(stream):
        torch.foo._sleep(100_000)
    torch.accelerator.synchronize(1)
    assert stream.query()


def test_memory(device):
    x = torch.empty(1 << 20, device=device)
    assert torch.accelerator.memory_allocated(device) == torch.foo.memory_allocated(device)
    assert torch.accelerator.max_memory_allocated(device) == torch.foo.max_memory_allocated(device)
    assert torch.accelerator.memory_reserved(device) == torch.foo.memory_reserved(device)
    assert torch.accelerator.max_memory_reserved(device) == torch.foo.max_memory_reserved(device)
    assert torch.accelerator.get_memory_info(device) == torch.foo.mem_get_info(device)
    del x
    torch.accelerator.empty_cache()
    assert torch.foo.memory_reserved(device) - torch.foo.memory_allocated(device) < (4 << 20)


def test_capability_and_properties(device):
    supported = torch.accelerator.get_device_capability(device)["supported_dtypes"]
    assert {torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex64} <= supported
    assert torch.qint8 not in supported  # quantized tensors need a QuantizedPrivateUse1 backend
    props = torch.foo.get_device_properties(device)
    assert props.total_memory == torch.foo.mem_get_info(device)[1]
    assert torch.foo.get_device_capability(device) == (props.major, props.minor)

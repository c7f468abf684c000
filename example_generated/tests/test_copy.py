"""Copies in every direction: host to device, device to host, within a device and between devices,
for contiguous and non-contiguous tensors, with dtype conversion and broadcasting."""

import pytest
import torch
from torch.testing import assert_close


def layouts(t: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same 2-D values in several memory layouts (t must be 2-D and at least 4 x 6)."""
    return {
        "contiguous": t,
        "transposed": t.t(),
        "sliced": t[::2, 1::2],
        "channels_last": t.reshape(1, 1, *t.shape).expand(2, 3, *t.shape).contiguous(memory_format=torch.channels_last),
        "expanded": t[:1].expand(5, -1),
    }


SOURCE = torch.arange(24, dtype=torch.float32).reshape(4, 6)


@pytest.mark.parametrize("layout", list(layouts(SOURCE)))
def test_host_to_device_and_back(device, layout):
    cpu = layouts(SOURCE)[layout]
    on_device = cpu.to(device)
    assert on_device.device == device
    assert_close(on_device.cpu(), cpu)


@pytest.mark.parametrize("layout", list(layouts(SOURCE)))
def test_device_to_device_same_device(device, layout):
    on_device = layouts(SOURCE.to(device))[layout]
    copied = on_device.clone()
    assert copied.device == device and copied.data_ptr() != on_device.data_ptr()
    assert_close(copied.cpu(), layouts(SOURCE)[layout])
    assert_close(on_device.contiguous().cpu(), layouts(SOURCE)[layout].contiguous())


@pytest.mark.two_devices
@pytest.mark.parametrize("layout", list(layouts(SOURCE)))
def test_between_devices(layout):
    src = layouts(SOURCE.to("foo:0"))[layout]
    dst = src.to("foo:1")
    assert dst.device == torch.device("foo:1")
    assert_close(dst.cpu(), layouts(SOURCE)[layout])
    dims = list(reversed(range(dst.dim())))
    back = torch.empty([dst.shape[d] for d in dims], device="foo:0").permute(dims)  # non-contiguous
    back.copy_(dst)
    assert_close(back.cpu(), layouts(SOURCE)[layout])


@pytest.mark.parametrize(
    "src_dtype,dst_dtype",
    [
        (torch.float32, torch.float64),
        (torch.float64, torch.float16),
        (torch.float32, torch.bfloat16),
        (torch.int64, torch.float32),
        (torch.float32, torch.int32),
        (torch.bool, torch.float32),
        (torch.uint8, torch.int64),
        (torch.float32, torch.complex64),
    ],
    ids=str,
)
def test_dtype_conversion_in_every_direction(device, src_dtype, dst_dtype):
    cpu = (SOURCE - 10).to(src_dtype)
    expected = cpu.to(dst_dtype)
    assert_close(cpu.to(device, dst_dtype).cpu(), expected)  # host -> device
    assert_close(cpu.to(device).to(dst_dtype).cpu(), expected)  # on the device
    assert_close(cpu.to(device).to("cpu", dst_dtype), expected)  # device -> host
    assert_close(cpu.t().to(device).to(dst_dtype).cpu(), expected.t())  # non-contiguous


def test_copy_into_non_contiguous_destinations(device):
    dst = torch.zeros(6, 4, device=device)
    dst.t()[1:3].copy_(torch.ones(2, 6))  # host -> strided device view
    dst[::2, 0].copy_(torch.arange(3.0, device=device))  # device -> strided device view
    expected = torch.zeros(6, 4)
    expected.t()[1:3].copy_(torch.ones(2, 6))
    expected[::2, 0].copy_(torch.arange(3.0))
    assert_close(dst.cpu(), expected)
    host = torch.zeros(4, 6).t()
    host.copy_(dst)  # device -> strided host
    assert_close(host, expected)


def test_broadcasting_copy(device):
    dst = torch.empty(3, 4, device=device)
    dst.copy_(torch.arange(4.0))
    assert_close(dst.cpu(), torch.arange(4.0).expand(3, 4))
    dst.copy_(torch.tensor(2.0, device=device))
    assert_close(dst.cpu(), torch.full((3, 4), 2.0))
    host = torch.empty(2, 3)
    host.copy_(torch.arange(3.0, device=device))
    assert_close(host, torch.arange(3.0).expand(2, 3))


def test_conjugate_and_negative_views(device):
    z = torch.tensor([1 + 2j, -3 + 4j])
    assert_close(z.conj().to(device).cpu(), z.conj().resolve_conj())
    on_device = z.to(device)
    assert_close(on_device.conj().cpu(), z.conj().resolve_conj())
    assert_close(on_device.conj().clone().cpu(), z.conj().resolve_conj())
    assert_close(torch._neg_view(on_device).cpu(), -z)


def test_empty_and_scalar_copies(device):
    assert torch.empty(0, 3).to(device).shape == (0, 3)
    assert torch.empty(0, device=device).cpu().numel() == 0
    assert torch.tensor(5.0).to(device).item() == 5.0
    assert torch.tensor(5.0, device=device).cpu().item() == 5.0


def test_large_copy_roundtrip(device):
    cpu = torch.randn(1 << 22)  # 16 MiB: the runtime splits it across its copy lanes
    assert torch.equal(cpu.to(device).cpu(), cpu)


def test_non_blocking_host_to_device_copy_is_correct(device):
    cpu = torch.randn(1000)
    on_device = cpu.to(device, non_blocking=True)
    torch.foo.synchronize(device)
    assert torch.equal(on_device.cpu(), cpu)

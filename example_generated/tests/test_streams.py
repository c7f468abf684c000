"""Streams: device work runs asynchronously and in order on the current stream, and
torch.foo.Stream, torch.Stream(device=...), current_stream, stream(...) and set_stream behave as
they do with CUDA."""

import pytest
import torch
from torch.testing import assert_close

SLEEP_US = 200_000  # a stream kept busy this long is still busy when the host looks at it


def test_default_and_current_stream(device):
    current = torch.foo.current_stream(device)
    assert current == torch.foo.default_stream(device)
    assert current.stream_id == 0 and current.device == device
    assert isinstance(current, torch.Stream)
    torch.foo.synchronize(device)  # work earlier tests left may still run (under a sanitizer, for seconds)
    assert current.query()


def test_new_streams(device):
    a, b = torch.foo.Stream(device), torch.foo.Stream(device)
    assert a != b and a.device == device and b.device == device
    generic = torch.Stream(device=device)
    assert generic.device == device and generic.device_type == a.device_type
    assert torch.foo.Stream().device == torch.device("foo", torch.foo.current_device())
    same = torch.Stream(stream_id=a.stream_id, device_index=a.device_index, device_type=a.device_type)
    assert same == a
    assert "foo" in repr(a)


def test_work_runs_asynchronously(device):
    torch.foo.synchronize(device)  # the default stream starts idle
    stream = torch.foo.Stream(device)
    with torch.foo.stream(stream):
        torch.foo._sleep(SLEEP_US)
    assert not stream.query()
    assert torch.foo.default_stream(device).query()  # other streams are not held up
    stream.synchronize()
    assert stream.query()


def test_device_synchronize_waits_for_every_stream(device):
    streams = [torch.foo.Stream(device) for _ in range(3)]
    for stream in streams:
        with torch.foo.stream(stream):
            torch.foo._sleep(SLEEP_US // 4)
    torch.foo.synchronize(device)
    assert all(stream.query() for stream in streams)


def test_work_on_a_stream_runs_in_order(device):
    stream = torch.foo.Stream(device)
    with torch.foo.stream(stream):
        x = torch.zeros(1000, device=device)
        torch.foo._sleep(SLEEP_US // 4)
        for _ in range(100):
            x.add_(1)
        result = (x * 2).cpu()  # copies to the host synchronise the current stream
    assert_close(result, torch.full((1000,), 200.0))


def test_missing_synchronisation_is_visible(device):
    """As on a real device, reading a tensor on one stream while another stream still writes it
    gives the old values: the emulation does not hide missing synchronisation."""
    x = torch.zeros(4, device=device)
    producer = torch.foo.Stream(device)
    producer.wait_stream(torch.foo.current_stream(device))
    with torch.foo.stream(producer):
        torch.foo._sleep(SLEEP_US)
        x.fill_(3)
    with torch.foo.device(device):
        assert_close(x.cpu(), torch.zeros(4))  # the default stream does not wait for the producer
    producer.synchronize()
    assert_close(x.cpu(), torch.full((4,), 3.0))


def test_wait_stream_orders_work_across_streams(device):
    x = torch.zeros(4, device=device)
    producer, consumer = torch.foo.Stream(device), torch.foo.Stream(device)
    producer.wait_stream(torch.foo.current_stream(device))  # x is zeroed on the current stream
    with torch.foo.stream(producer):
        torch.foo._sleep(SLEEP_US // 2)
        x.fill_(3)
    consumer.wait_stream(producer)
    with torch.foo.stream(consumer):
        assert not consumer.query()  # waiting for the producer
        result = (x * 2).cpu()
    assert_close(result, torch.full((4,), 6.0))


@pytest.mark.two_devices
def test_stream_context_sets_and_restores_stream_and_device():
    stream = torch.foo.Stream("foo:1")
    assert torch.foo.current_device() == 0
    with torch.foo.stream(stream) as entered:
        assert entered is stream
        assert torch.foo.current_device() == 1
        assert torch.foo.current_stream() == stream
        assert torch.ones(1, device="foo").device.index == 1
    assert torch.foo.current_device() == 0
    assert torch.foo.current_stream(1) == torch.foo.default_stream(1)
    with torch.foo.stream(None):
        assert torch.foo.current_stream() == torch.foo.default_stream(0)


def test_generic_stream_context_and_accelerator_streams():
    stream = torch.Stream(device="foo:0")
    with stream:
        assert torch.accelerator.current_stream() == stream
        assert torch.foo.current_stream() == stream
    assert torch.accelerator.current_stream() == torch.foo.default_stream(0)
    torch.accelerator.set_stream(stream)
    assert torch.foo.current_stream(0) == stream


@pytest.mark.two_devices
def test_set_stream_makes_its_device_current():
    stream = torch.foo.Stream("foo:1")
    torch.foo.set_stream(stream)
    assert torch.foo.current_device() == 1
    assert torch.foo.current_stream() == stream
    torch.foo.set_stream(None)  # no change
    assert torch.foo.current_stream() == stream


def test_priorities():
    assert torch.foo.Stream.priority_range() == (0, -1)
    assert torch.foo.Stream(priority=-1).priority == -1
    assert torch.foo.Stream(priority=-7).priority == -1  # clamped to the range, as with CUDA
    assert torch.foo.Stream(priority=0).priority == 0
    assert torch.foo.default_stream().priority == 0


def test_bad_streams_raise_and_change_nothing():
    kind = torch.foo.current_stream().device_type
    with pytest.raises(RuntimeError, match="Invalid foo stream id 999"):
        torch.Stream(stream_id=999, device_index=0, device_type=kind).query()
    with pytest.raises(TypeError, match="Expected a foo stream"):
        torch.foo.set_stream(torch.Stream(device="cpu"))
    with pytest.raises(TypeError, match="Expected a foo stream"):
        torch.foo.stream("not a stream")
    with pytest.raises(RuntimeError, match="Invalid foo device index 99"):
        torch.foo.Stream("foo:99")
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.foo._sleep(-1)
    assert torch.foo.current_stream() == torch.foo.default_stream(0)
    assert torch.foo.current_device() == 0


def test_kernel_failure_is_reported_at_the_next_synchronisation(device):
    stream = torch.foo.Stream(device)
    with torch.foo.stream(stream):
        torch.foo._C._launch_failing_kernel("deliberate failure")  # enqueuing succeeds
        x = torch.ones(3, device=device) + 1  # later work still runs
        with pytest.raises(RuntimeError, match="a kernel failed: (kernel )?trap: deliberate failure"):
            stream.synchronize()
        stream.synchronize()  # reported once; the stream keeps working
        assert_close(x.cpu(), torch.full((3,), 2.0))

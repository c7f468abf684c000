"""Events: record, query, synchronize, stream-wait-event and elapsed time, through
torch.foo.Event and the generic torch.Event(device=...)."""

import pytest
import torch
from torch.testing import assert_close

SLEEP_US = 200_000


def test_record_query_synchronize(device):
    with torch.foo.device(device):
        event = torch.foo.Event()
        assert event.query()  # never recorded: nothing to wait for
        torch.foo._sleep(SLEEP_US)
        event.record()
        assert not event.query()
        event.synchronize()
        assert event.query()


def test_an_event_marks_a_point_not_the_end_of_the_stream(device):
    with torch.foo.device(device):
        torch.foo.current_stream().synchronize()
        event = torch.foo.Event()
        event.record()  # before the sleep
        torch.foo._sleep(SLEEP_US)
        assert event.query()
        assert not torch.foo.current_stream().query()


def test_elapsed_time_measures_device_work(device):
    with torch.foo.device(device):
        start, end = torch.foo.Event(enable_timing=True), torch.foo.Event(enable_timing=True)
        start.record()
        torch.foo._sleep(50_000)
        end.record()
        end.synchronize()
        assert start.elapsed_time(end) >= 49.0  # milliseconds
        assert end.elapsed_time(start) <= -49.0


def test_elapsed_time_needs_timing_records_and_completion():
    a, b = torch.foo.Event(), torch.foo.Event()
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):
        a.elapsed_time(b)
    start, end = torch.foo.Event(enable_timing=True), torch.foo.Event(enable_timing=True)
    with pytest.raises(ValueError, match="recorded"):
        start.elapsed_time(end)
    start.record()
    torch.foo._sleep(SLEEP_US)
    end.record()
    with pytest.raises(RuntimeError, match="completed"):
        start.elapsed_time(end)
    end.synchronize()
    assert start.elapsed_time(end) > 0


def test_stream_waits_for_event(device):
    x = torch.zeros(4, device=device)
    producer, consumer = torch.foo.Stream(device), torch.foo.Stream(device)
    producer.wait_stream(torch.foo.current_stream(device))  # x is zeroed on the current stream
    with torch.foo.stream(producer):
        torch.foo._sleep(SLEEP_US // 2)
        x.fill_(5)
        ready = producer.record_event()
    assert isinstance(ready, torch.foo.Event) and not ready.query()
    consumer.wait_event(ready)
    with torch.foo.stream(consumer):
        result = (x + 1).cpu()
    assert_close(result, torch.full((4,), 6.0))


def test_event_wait_defaults_to_the_current_stream(device):
    x = torch.zeros(4, device=device)
    producer = torch.foo.Stream(device)
    producer.wait_stream(torch.foo.current_stream(device))
    with torch.foo.stream(producer):
        torch.foo._sleep(SLEEP_US // 2)
        x.fill_(2)
    ready = torch.foo.Event()
    ready.record(producer)
    with torch.foo.device(device):
        ready.wait()
        assert_close(x.cpu(), torch.full((4,), 2.0))


def test_generic_torch_event(device):
    stream = torch.Stream(device=device)
    start = torch.Event(device=device, enable_timing=True)
    end = torch.Event(device=device, enable_timing=True)
    mine = torch.foo.Event(enable_timing=True)
    start.record(stream)
    with torch.foo.stream(stream):
        torch.foo._sleep(10_000)
    end.record(stream)
    mine.record(stream)
    stream.synchronize()
    assert start.query() and end.query() and mine.query()
    assert start.elapsed_time(end) >= 9.0
    assert mine.elapsed_time(start) <= -9.0  # a torch.foo.Event takes a torch.Event ...
    assert mine.elapsed_time(mine) == 0.0  # ... or its own kind (torch.Event.elapsed_time takes only torch.Event)


@pytest.mark.two_devices
def test_an_event_stays_on_its_device():
    event = torch.foo.Event()
    event.record(torch.foo.Stream("foo:0"))
    with pytest.raises(RuntimeError, match="does not match recording stream's device"):
        event.record(torch.foo.Stream("foo:1"))
    assert event.query()


def test_interprocess_events_are_rejected():
    with pytest.raises(NotImplementedError):
        torch.foo.Event(interprocess=True)

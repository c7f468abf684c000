"""Memory debugging: the memory history and snapshots of torch.foo.memory in CUDA's format
(csrc/core/MemoryHistory.h, the allocator's hooks), which come with the profiler answer."""

import pickle

import pytest
import torch
from torch.cuda import _memory_viz

DEVICE = "foo"
MiB = 1 << 20


@pytest.fixture
def history():
    """Records memory history (Python stacks) for the test, and stops afterwards."""
    torch.foo.memory._record_memory_history(max_entries=10_000, stacks="python", clear_history=True)
    yield
    torch.foo.memory._record_memory_history(enabled=None)


def allocate_for_the_snapshot(nbytes: int, device: str) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def frames_name(frames: list[dict], name: str) -> bool:
    return any(f["name"] == name and f["filename"] == __file__ and f["line"] > 0 for f in frames)


@pytest.mark.parametrize("index", [0, pytest.param(1, marks=pytest.mark.two_devices)])
def test_snapshot_shows_blocks_with_the_stack_that_allocated_them(history, index):
    torch.foo.empty_cache()  # the allocation below takes a new segment
    x = allocate_for_the_snapshot(3 * MiB + 5, f"{DEVICE}:{index}")
    snapshot = torch.foo.memory._snapshot()
    (segment,) = [s for s in snapshot["segments"] if s["address"] <= x.data_ptr() < s["address"] + s["total_size"]]
    assert segment["device"] == index and segment["segment_type"] == "large"
    assert sum(b["size"] for b in segment["blocks"]) == segment["total_size"]
    (block,) = [b for b in segment["blocks"] if b["address"] == x.data_ptr()]
    assert block["state"] == "active_allocated"
    assert block["requested_size"] == 3 * MiB + 5 <= block["size"]
    assert frames_name(block["frames"], "allocate_for_the_snapshot")
    trace = snapshot["device_traces"][index]
    actions = [e["action"] for e in trace if e.get("addr") == x.data_ptr()]
    assert "segment_alloc" in actions and actions[-1] == "alloc"
    (alloc,) = [e for e in trace if e["action"] == "alloc" and e["addr"] == x.data_ptr()]
    assert alloc["size"] == 3 * MiB + 5 and alloc["time_us"] > 0
    assert frames_name(alloc["frames"], "allocate_for_the_snapshot")
    address = x.data_ptr()
    del x
    trace = torch.foo.memory._snapshot()["device_traces"][index]
    assert [e["action"] for e in trace if e.get("addr") == address][-2:] == ["free_requested", "free_completed"]


def test_snapshot_round_trips_through_a_file_that_pytorch_memory_tools_read(history, tmp_path):
    x = allocate_for_the_snapshot(MiB, DEVICE)
    y = allocate_for_the_snapshot(100, DEVICE)
    path = tmp_path / "snapshot.pickle"
    torch.foo.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    assert snapshot["segments"] == torch.foo.memory.memory_snapshot()
    # torch.cuda's snapshot tools read it: a segment summary, a replay of the history, the timeline page.
    assert f"segments: {len(snapshot['segments'])}" in _memory_viz.segsum(snapshot)
    history_entries = len(snapshot["device_traces"][0])
    assert f"{history_entries} entries" in _memory_viz.trace(snapshot)
    assert "Active Memory Timeline" in _memory_viz.trace_plot(snapshot)
    del x, y


def test_history_keeps_the_newest_entries_and_stops_when_disabled():
    torch.foo.memory._record_memory_history(max_entries=3, stacks="python", clear_history=True)
    try:
        for _ in range(5):
            allocate_for_the_snapshot(1000, DEVICE)
        trace = torch.foo.memory._snapshot()["device_traces"][0]
        assert len(trace) == 3 and trace[-1]["action"] == "free_completed"
    finally:
        torch.foo.memory._record_memory_history(enabled=None)
    x = allocate_for_the_snapshot(1000, DEVICE)
    snapshot = torch.foo.memory._snapshot()
    assert snapshot["device_traces"][0] == []
    blocks = [b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == x.data_ptr()]
    assert blocks[0]["frames"] == []
    del x


def test_state_only_keeps_stacks_of_live_allocations_without_a_history():
    torch.foo.memory._record_memory_history(enabled="state", stacks="python")
    try:
        x = allocate_for_the_snapshot(1000, DEVICE)
        snapshot = torch.foo.memory._snapshot()
    finally:
        torch.foo.memory._record_memory_history(enabled=None)
    assert snapshot["device_traces"][0] == []
    (block,) = [b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == x.data_ptr()]
    assert frames_name(block["frames"], "allocate_for_the_snapshot")
    del x


def test_cpp_stacks_can_be_recorded_too():
    torch.foo.memory._record_memory_history(max_entries=100, stacks="all", clear_history=True)
    try:
        x = allocate_for_the_snapshot(1000, DEVICE)
        snapshot = torch.foo.memory._snapshot()
    finally:
        torch.foo.memory._record_memory_history(enabled=None)
    (block,) = [b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == x.data_ptr()]
    assert frames_name(block["frames"], "allocate_for_the_snapshot")
    assert len(block["frames"]) > len([f for f in block["frames"] if f["filename"].endswith(".py")])
    del x


def test_bad_arguments_raise():
    with pytest.raises(RuntimeError, match="enabled must be"):
        torch.foo.memory._record_memory_history(enabled="sometimes")
    with pytest.raises(RuntimeError, match="context must be"):
        torch.foo.memory._record_memory_history(context="everything")
    with pytest.raises(RuntimeError, match="stacks must be"):
        torch.foo.memory._record_memory_history(stacks="java")

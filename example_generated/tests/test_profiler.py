"""The profiler: device activity in torch.profiler traces and tables, the legacy profiler's device
times, and device memory in profile_memory (csrc/profiler/KinetoSession.cpp, LegacyProfiler.cpp,
csrc/runtime/tracing.h)."""

import json

import pytest
import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

DEVICE = "foo"
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def exported_events(prof, tmp_path) -> list[dict]:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())["traceEvents"]


def test_trace_shows_kernels_and_copies_on_stream_tracks_linked_to_operators(tmp_path):
    a = torch.randn(128, 128, device=DEVICE)
    with profile(activities=ACTIVITIES) as prof:
        result = (a * 2 + 1).cpu()
    assert torch.allclose(result, a.cpu() * 2 + 1)
    events = exported_events(prof, tmp_path)
    operators = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op" and "External id" in e["args"]}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    assert kernels and copies
    device_pid = kernels[0]["pid"]
    for event in kernels + copies:
        assert event["pid"] == device_pid == 0, "device work is on the device's track group, device 0"
        assert event["dur"] > 0
        launcher = operators[event["args"]["External id"]]
        assert launcher["ts"] <= event["ts"], "work starts after the operator that launched it started"
    assert {operators[k["args"]["External id"]]["name"] for k in kernels} == {"aten::mul", "aten::add"}
    for kernel in kernels:  # named after the function launched, which says what it computes
        assert kernel["name"] and kernel["name"] in operators[kernel["args"]["External id"]]["name"]
    (copy,) = [c for c in copies if c["name"] == "Memcpy DtoH"]
    assert copy["args"]["bytes"] == 128 * 128 * 4
    assert "copy" in operators[copy["args"]["External id"]]["name"]
    # Arrows from each runtime call on the host thread to the work it enqueued.
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {e["id"]: e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    for kernel in kernels:
        flow = kernel["args"]["correlation"]
        assert flow in starts and flow in ends and ends[flow]["pid"] == device_pid
        assert starts[flow]["pid"] != device_pid, "the arrow starts on a host thread"
    # A named track per stream, and the device's name on its process group.
    names = [e for e in events if e.get("ph") == "M" and e.get("pid") == device_pid]
    assert any(e["name"] == "process_name" and e["args"]["name"] == f"{DEVICE}:0" for e in names)
    assert any(e["name"] == "thread_name" and "(default)" in e["args"]["name"] for e in names)


def test_kernel_times_lie_inside_the_step_that_ran_them(tmp_path):
    """Kernel records carry the times the driver gives them (a real device's profiling clock, mapped
    onto the host's): each kernel starts after the operator that launched it, lasts a positive time and
    ends within the profiler step that launched it and waited for it."""
    a = torch.randn(256, 256, device=DEVICE)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)
    traces = []  # the events of the active steps, exported when they end
    with profile(
        activities=ACTIVITIES, schedule=schedule, on_trace_ready=lambda p: traces.append(exported_events(p, tmp_path))
    ) as prof:
        for _ in range(3):
            result = (a * 2 + 1) * a
            torch.foo.synchronize()
            prof.step()
    del result
    (events,) = traces
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    operators = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op" and "External id" in e["args"]}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(steps) == 2 and len(kernels) == 2 * 3, (steps, kernels)
    for kernel in kernels:
        start, end = kernel["ts"], kernel["ts"] + kernel["dur"]
        assert kernel["dur"] > 0
        assert operators[kernel["args"]["External id"]]["ts"] <= start
        inside = [step for step in steps if step["ts"] <= start and end <= step["ts"] + step["dur"]]
        assert len(inside) == 1, f"kernel {kernel} lies in no step of {steps}"


@pytest.mark.two_devices
def test_work_on_the_second_device_and_a_side_stream_gets_its_own_tracks(tmp_path):
    stream = torch.foo.Stream(device=1)
    x = torch.ones(1000, device=f"{DEVICE}:1")
    with profile(activities=ACTIVITIES) as prof:
        with torch.foo.stream(stream):
            y = x * 2
        stream.synchronize()
    del y
    kernels = [e for e in exported_events(prof, tmp_path) if e.get("cat") == "kernel"]
    assert [k["pid"] for k in kernels] == [1]
    assert kernels[0]["tid"] != 0


def test_key_averages_report_device_time_per_operator():
    a = torch.randn(256, 256, device=DEVICE)
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(3):
            a @ a
            a * 2
    averages = {event.key: event for event in prof.key_averages()}
    mm, mul = averages["aten::mm"], averages["aten::mul"]
    assert mm.count == mul.count == 3
    assert mm.device_time_total > 0  # whatever runs it: a device kernel, or the CPU fallback's copies
    assert mul.device_time_total >= mul.self_device_time_total > 0  # its own kernel
    assert mm.device_time_total <= mm.cpu_time_total + 1e6  # microseconds, not garbage
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=5)
    assert f"Self {DEVICE.upper()}" in table


def test_record_function_ranges_appear_on_the_device_timeline(tmp_path):
    x = torch.randn(1000, device=DEVICE)
    with profile(activities=ACTIVITIES) as prof:
        with record_function("my_block"):
            y = x.sin() * 2
        torch.foo.synchronize()
    del y
    events = exported_events(prof, tmp_path)
    spans = [e for e in events if e.get("cat") == "gpu_user_annotation"]  # one per stream the range used
    assert spans and all(s["name"] == "my_block" and s["pid"] == 0 and s["dur"] > 0 for s in spans)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert any(
        s["tid"] == k["tid"] and s["ts"] <= k["ts"] and k["ts"] + k["dur"] <= s["ts"] + s["dur"] + 0.002
        for s in spans
        for k in kernels
    )


def test_profiling_the_cpu_alone_records_no_device_activity(tmp_path):
    x = torch.randn(1000, device=DEVICE)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x * 2
    events = exported_events(prof, tmp_path)
    assert not [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "privateuse1_runtime")]


def test_profile_memory_shows_device_allocations():
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        x = torch.empty(1 << 20, dtype=torch.uint8, device=DEVICE)
        del x
    averages = {event.key: event for event in prof.key_averages()}
    assert averages["aten::empty"].device_memory_usage == 1 << 20
    assert averages["[memory]"].device_memory_usage == -(1 << 20)


def test_legacy_profiler_reports_device_time_without_errors(run_python):
    result = run_python(
        """
        import torch, torch_foo
        a = torch.randn(256, 256, device="foo")
        with torch.autograd.profiler.profile(use_device="foo") as prof:
            for _ in range(3):
                a @ a
            torch.foo.synchronize()
        mm = [e for e in prof.key_averages() if e.key == "aten::mm"][0]
        print("device", mm.device_time_total, "cpu", mm.cpu_time_total)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "not enabled" not in result.stderr and "Exception" not in result.stderr, result.stderr
    _, device_us, _, cpu_us = result.stdout.split()
    assert 0 < float(device_us) < 60e6, "a positive, sane device time in microseconds"


def test_profiling_twice_in_a_row_works(tmp_path):
    x = torch.randn(100, device=DEVICE)
    for _ in range(2):
        with profile(activities=ACTIVITIES) as prof:
            x + 1
        assert [e for e in exported_events(prof, tmp_path) if e.get("cat") == "kernel"]

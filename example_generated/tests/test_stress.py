"""Stress: many host threads, each on its own device and streams, allocate, copy (between host and
device, pinned and pageable, between devices), launch kernels, join streams with events and free, all
at once, for a bounded time. Every result is checked, the device memory held by tensors returns to its
starting value, and a watchdog turns a deadlock into a failure with every thread's stack instead of a
hang. FOO_STRESS_SECONDS sets the duration (a soak run: FOO_STRESS_SECONDS=600)."""

import json
import os

import pytest

# The child: a watchdog (faulthandler, which needs no GIL) dumps every thread's stack and ends the
# process if the work has not finished in time; the test process itself never waits unbounded.
PROGRAM = """
import faulthandler, gc, json, os, random, threading, time
import torch, torch_foo

SECONDS, THREADS = float(os.environ.get("FOO_STRESS_SECONDS", "3")), 8
faulthandler.dump_traceback_later(SECONDS + 120, exit=True)
devices = torch.foo.device_count()
baseline = [torch.foo.memory_allocated(d) for d in range(devices)]
deadline = time.monotonic() + SECONDS
rounds, errors = [0] * THREADS, []


def expect(name, got, want):
    if not torch.equal(got.cpu(), want):
        raise AssertionError(f"{name}: got {got.cpu()[:8].tolist()} ..., want {want[:8].tolist()} ...")


def work(index):
    rng = random.Random(index)
    device = index % devices
    torch.foo.set_device(device)
    other = torch.device("foo", (device + 1) % devices)
    main, side = torch.foo.Stream(), torch.foo.Stream()
    while time.monotonic() < deadline:
        n = rng.choice([1, 7, 1000, 1 << 14, 1 << 18])
        host = torch.arange(n, dtype=torch.float32) + index
        with torch.foo.stream(main):
            x = host.to("foo") if rng.random() < 0.5 else host.pin_memory().to("foo", non_blocking=True)
            side.wait_stream(main)  # an event recorded on main, waited for on side
            with torch.foo.stream(side):
                y = x * 2 + 1
                x.record_stream(side)
            del x  # freed while side may still read it: record_stream keeps it until then
            main.wait_stream(side)
            y.record_stream(main)
            z = y.to(other)  # between devices
            back = torch.empty(n, pin_memory=True)
            back.copy_(y, non_blocking=True)
            done = torch.foo.Event()
            done.record(main)
        done.synchronize()
        expect("pinned copy back", back, host * 2 + 1)
        expect("copy between devices", z, host * 2 + 1)
        del y, z
        if rng.random() < 0.05:
            torch.foo.empty_cache()  # the allocator gives memory back while others allocate
        rounds[index] += 1


def guarded(index):
    try:
        work(index)
    except BaseException as error:  # noqa: BLE001 - reported below
        errors.append(f"thread {index}: {error!r}")


threads = [threading.Thread(target=guarded, args=(i,)) for i in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
for d in range(devices):
    torch.foo.synchronize(d)
gc.collect()
leaked = [torch.foo.memory_allocated(d) - baseline[d] for d in range(devices)]
print(json.dumps({"rounds": rounds, "errors": errors, "leaked": leaked}))
"""


# A storm of processes or threads: minutes under load, run with the whole suite (CI's example).
@pytest.mark.slow
def test_many_threads_on_many_devices_and_streams(run_python):
    seconds = float(os.environ.get("FOO_STRESS_SECONDS", "3"))
    result = run_python(PROGRAM, timeout=seconds + 300)  # a backstop behind the child's own watchdog
    assert result.returncode == 0, f"the stress run failed or hung (watchdog):\n{result.stdout}\n{result.stderr}"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["errors"] == []
    assert all(rounds > 0 for rounds in report["rounds"]), report["rounds"]
    assert report["leaked"] == [0] * len(report["leaked"])

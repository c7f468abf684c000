"""Process exit with work in flight: a process that exits without synchronising, while its streams
still run kernels and idle threads hold streams and tensors, ends cleanly, with the exit code it chose,
however it exits (returning, os._exit, an uncaught exception). The runtime drains the queues at exit
and then stops its stream workers, so that no kernel runs while the libraries it calls are torn down
(csrc/runtime/emulated/streams.cpp, Lifetime)."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import REAP_CHILD
from numerics import DRIVER

# Each exit is a process of its own, forked before the runtime is initialised (which is allowed):
# the fork costs milliseconds where a new interpreter costs seconds. The child initialises the
# device, queues work, and exits. The parent waits a bounded time for each child (REAP_CHILD).
PROGRAM = """
import os, sys, threading, time
import torch, torch_foo

assert not torch.foo.is_initialized()
DEVICES = torch.foo.device_count()


def busy_then_exit(how):
    streams = [torch.foo.Stream(f"foo:{i % DEVICES}") for i in range(4)]
    held = []

    def hold(stream):  # holds a stream and its tensors, then idles until the process ends
        with torch.foo.stream(stream):
            x = torch.randn(128, 128, device=stream.device)
            held.append(x @ x)
        time.sleep(1000)

    for stream in streams:
        threading.Thread(target=hold, args=(stream,), daemon=True).start()
    for stream in streams:
        with torch.foo.stream(stream):
            torch.foo._sleep(20_000)
            x = torch.randn(256, 256, device=stream.device)
            for _ in range(10):
                x = (x @ x).tanh()  # queued behind the sleep: still running at exit
    while len(held) < len(streams):
        time.sleep(0.001)
    if how == "return":
        sys.exit(0)
    if how == "os._exit":
        os._exit(0)
    raise RuntimeError("uncaught on purpose")


statuses = []
for how in ["return", "os._exit", "exception"] * 4:
    pid = os.fork()
    if pid == 0:
        busy_then_exit(how)  # never returns here: the child exits
    statuses.append((how, wait(pid)))
print("statuses:", statuses)
"""


# PoCL 3.1 (Debian 12's) aborts about one such process in ten, with the assertion
# `found->ref_count > 0` in pocl_release_dlhandle_cache: several threads' matrix products release
# CLBlast's kernel objects while PoCL's worker threads release the same programs' handles. Not this
# backend's to fix (docs/opencl.md, Known problems); the test still runs there and must pass elsewhere.
@pytest.mark.xfail(
    DRIVER == "opencl",
    reason="PoCL 3.1 aborts in pocl_release_dlhandle_cache when threads release kernels concurrently",
    strict=False,
)
def test_exit_with_work_in_flight_and_threads_holding_streams(run_python):
    result = run_python(REAP_CHILD + PROGRAM)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = [("return", 0), ("os._exit", 0), ("exception", 1)] * 4
    assert f"statuses: {expected}" in result.stdout, result.stdout + result.stderr
    assert result.stderr.count("RuntimeError: uncaught on purpose") == 4
    assert "terminate called" not in result.stderr and "Sanitizer" not in result.stderr, result.stderr


# A program whose last act is a backward pass on the devices, run as users run it: a new interpreter
# that returns (or exits inside torch.no_grad()) right after. torch's autograd thread of each device
# must not still hold that pass when the interpreter finalizes, or the process aborts after its work
# is done (csrc/python/AutogradThreads.cpp). The abort was a race lost by about one exit in ten, so
# the program runs in many interpreters; the custom Function puts a Python node in the graph.
BACKWARD_THEN_EXIT = """
import os
import torch
import torch.nn.functional as F
import torch_foo


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


for index in range(torch.foo.device_count()):
    x = torch.randn(4, 10, device=f"foo:{index}", requires_grad=True)
    F.cross_entropy(Twice.apply(x), torch.tensor([1, 0, 9, 3], device=x.device)).backward()
    F.softmax(x, dim=0).sum().backward()
# The waits at exit are the backend's, not the program's: they must not count as its synchronizations.
torch.foo.set_sync_debug_mode("warn")
if os.environ["EXIT_IN_NO_GRAD"] == "1":
    with torch.no_grad():
        raise SystemExit(0)
"""


# A storm of processes or threads: minutes under load, run with the whole suite (CI's example).
@pytest.mark.slow
def test_exit_right_after_a_backward_pass_is_clean(run_python):
    # Eight interpreters at a time (each mostly waits to start), sixteen in all, each with a timeout.
    def run(i: int):
        return run_python(BACKWARD_THEN_EXIT, timeout=240, EXIT_IN_NO_GRAD=str(i % 2), FOO_DEVICE_COUNT="3")

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(run, range(16)))
    for result in results:
        assert result.returncode == 0, result.stdout + result.stderr
        assert "terminate called" not in result.stderr, result.stderr
        assert "synchronizing" not in result.stderr, result.stderr

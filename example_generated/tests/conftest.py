"""Shared fixtures. Importing torch_foo here makes the tests independent of autoload."""

import gc
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

# Strict memory mode: host code cannot read or write device memory, so integration code that
# dereferences a device pointer crashes in these tests instead of on hardware. The runtime reads its
# configuration once, on its first call, which `import torch` can already make (autoload imports
# the backend, and the backend asks for the device count), so this comes before every import.
os.environ.setdefault("FOO_STRICT_MEMORY", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from numerics import DRIVER  # noqa: E402

import torch_foo  # noqa: E402,F401

DEVICE = "foo"


@pytest.fixture(scope="session")
def run_python():
    """run_python(code, script=None, timeout=300, **env) runs `code` (dedented) in a new interpreter with this
    process's environment updated by `env` (a None value removes a variable) and returns the
    CompletedProcess. The backend is not autoloaded unless env sets TORCH_DEVICE_BACKEND_AUTOLOAD="1".
    With `script` (a path), the code is written there and run as a file, which 'spawn' children need.
    A child still running after `timeout` seconds is killed and the test fails."""

    def run(
        code: str, script: Path | None = None, timeout: float = 300, **env: str | None
    ) -> subprocess.CompletedProcess:
        merged = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **env}
        environment = {name: value for name, value in merged.items() if value is not None}
        if script is None:
            command = [sys.executable, "-c", textwrap.dedent(code)]
        else:
            script.write_text(textwrap.dedent(code))
            command = [sys.executable, str(script)]
        return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=timeout)

    return run


# Source for programs that fork (tests/test_exit.py, tests/test_fork.py): wait(pid) reaps a child
# within a bounded time and returns its exit code, or kills it and returns "hung".
REAP_CHILD = """\
import os, time


def wait(pid, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"


"""


RANK_PRELUDE = """\
import os
import torch
import torch.distributed as dist
import torch_foo
rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
"""


_PORTS_GIVEN: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, for a store or rendezvous that ranks
    started later will bind. It lies below the kernel's ephemeral range
    (/proc/sys/net/ipv4/ip_local_port_range): a port that bind(0) handed out is free again once the
    probe closes, and any connection made before the rank binds it (gloo's, another test's) can get
    it as its local port, so the rank's bind fails with "address already in use". Below the range
    only an explicit bind takes a port; the choice is random, so that tests running in parallel
    processes do not try the same ports in the same order, and no port is given twice in a process."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default; other systems have their own ranges, mostly above this
    generator = random.Random()
    for _ in range(200):
        port = generator.randrange(10000, max(low, 10001))
        if port in _PORTS_GIVEN:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _PORTS_GIVEN.add(port)
        return port
    raise RuntimeError(f"no free TCP port between 10000 and {low} on 127.0.0.1")


def launch_ranks(directory: Path, stem: str, *code: str, world_size: int = 2, timeout: float = 180, **env: str):
    """Runs the pieces of `code` (each dedented, after RANK_PRELUDE: imports, `rank` and
    `world_size`) as directory/stem.py in `world_size` new interpreters at once, the ranks of one job
    on this host, with the variables torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, a free
    MASTER_PORT) and `env`. A rank still running after `timeout` seconds is killed with everything it
    started: a hung collective never hangs the suite. Returns (the ranks' CompletedProcesses in rank
    order, the ranks that were killed, a report of every rank's output)."""
    script = directory / f"{stem}.py"
    script.write_text(RANK_PRELUDE + "".join(textwrap.dedent(piece) for piece in code))
    port = free_port()
    processes, logs = [], []
    for rank in range(world_size):
        ranks = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": world_size, "LOCAL_WORLD_SIZE": world_size}
        environment = {
            **os.environ,
            "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            **{name: str(value) for name, value in ranks.items()},
            **env,
        }
        # Files, not pipes: a rank that prints a lot never blocks while another one is waited for.
        out = open(directory / f"{stem}.{rank}.out", "w+")
        err = open(directory / f"{stem}.{rank}.err", "w+")
        logs.append((out, err))
        command = [sys.executable, str(script)]
        processes.append(
            subprocess.Popen(command, stdout=out, stderr=err, env=environment, cwd=directory, start_new_session=True)
        )
    deadline = time.monotonic() + timeout
    hung = []
    for rank, process in enumerate(processes):
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung.append(rank)
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # the rank and anything it started
            process.wait()
    results = []
    for process, (out, err) in zip(processes, logs, strict=True):
        out.seek(0)
        err.seek(0)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out.read(), err.read()))
        out.close()
        err.close()
    report = "\n".join(
        f"--- rank {rank} (exit {r.returncode}) stdout:\n{r.stdout}\n--- rank {rank} stderr:\n{r.stderr[-4000:]}"
        for rank, r in enumerate(results)
    )
    if hung:
        report = f"ranks {hung} were still running after {timeout} s and were killed\n{report}"
    return results, hung, report


@pytest.fixture
def run_ranks(tmp_path):
    """run_ranks(*code, world_size=2, timeout=180, check=True, **env): launch_ranks in tmp_path.
    Returns the ranks' CompletedProcesses in rank order; fails the test if a rank had to be killed
    and, with check, unless every rank exited with 0."""
    runs = iter(range(1_000_000))

    def run(*code: str, world_size: int = 2, timeout: float = 180, check: bool = True, **env: str):
        stem = f"ranks{next(runs)}"
        results, hung, report = launch_ranks(tmp_path, stem, *code, world_size=world_size, timeout=timeout, **env)
        if hung:
            pytest.fail(report)
        if check and any(r.returncode != 0 for r in results):
            pytest.fail(f"a rank failed\n{report}")
        return results

    return run


@pytest.fixture(params=range(torch.foo.device_count()), ids=lambda i: f"{DEVICE}:{i}")
def device(request) -> torch.device:
    """Each foo device in turn."""
    return torch.device(DEVICE, request.param)


def pytest_collection_modifyitems(config, items):
    """Skips, with the reason, what this machine or driver cannot run: tests marked two_devices with
    fewer than two devices, and tests marked emulated_driver (a mechanism of the emulated device:
    its strict memory mode, fault injection, sensors, the device count and memory size it takes from
    environment variables, its kernel ABI) on another driver; the docs of that driver say what
    replaces each on a real device."""
    count = torch.foo.device_count()
    for item in items:
        if count < 2 and item.get_closest_marker("two_devices") is not None:
            item.add_marker(pytest.mark.skip(reason=f"needs two {DEVICE} devices; there are {count}"))
        emulated = item.get_closest_marker("emulated_driver")
        if emulated is not None and DRIVER != "emulated":
            what = emulated.args[0] if emulated.args else "a mechanism of the emulated device"
            reason = f"tests the emulated driver's {what}; this project's driver is {DRIVER}"
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _restore_current_device():
    """Tests may switch the current device or stream; the next test starts on device 0 and the
    default streams again."""
    yield
    for index in range(torch.foo.device_count()):
        torch.foo.set_stream(torch.foo.default_stream(index))
    torch.foo.set_device(0)


@pytest.fixture(scope="session", autouse=True)
def _no_device_memory_leaks():
    """Device memory held by tensors returns to its starting value after the whole suite (the
    caching allocator keeps freed blocks, but they no longer count as allocated). Keep device
    tensors out of module scope: they would count as a leak here."""
    devices = range(torch.foo.device_count())
    before = [torch.foo.memory_allocated(i) for i in devices]
    yield
    gc.collect()
    after = [torch.foo.memory_allocated(i) for i in devices]
    assert after == before, (
        f"device memory still allocated after the test suite (bytes per device): {before} -> {after}"
    )

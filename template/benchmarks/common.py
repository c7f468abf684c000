"""Side-by-side timing helpers: the machines these run on are noisy, so every figure is a ratio
of two measurements interleaved in the same run, never an absolute threshold.

Every benchmark function returns Rows (numbers); the scripts print them as tables and
benchmarks/report.py plots them. set_quick() makes every measurement short (a smoke test of the
scripts and the report, not numbers to read)."""

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

# How long measurements run: compare()'s rounds and each timing's minimum duration.
SETTINGS = {"rounds": 9, "min_seconds": 0.02, "quick": False}


def set_quick() -> None:
    SETTINGS.update(rounds=2, min_seconds=0.002, quick=True)


def quick() -> bool:
    return bool(SETTINGS["quick"])


@dataclass
class Row:
    """One measurement: seconds per call of the baseline (usually the CPU) and of the candidate (the
    device), and the median of their per-round ratios (candidate / baseline)."""

    name: str
    baseline: float
    candidate: float
    ratio: float
    params: dict = field(default_factory=dict)  # what varies between rows, for plots (size, direction, ...)


@dataclass
class Section:
    """A section of benchmarks/report.py: a module joins the report by defining
    report_sections() -> list[Section]. Its rows are shown as a table and as bars, baseline next to
    candidate (labels name them)."""

    title: str
    text: str
    rows: list[Row]
    labels: tuple[str, str] = ("cpu", "device")

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() else "_" for c in self.title.lower())


def measure(
    name: str,
    baseline: Callable[[], object],
    candidate: Callable[[], object],
    rounds=None,
    min_seconds: float | None = None,
    **params,
) -> Row:
    return Row(name, *compare(baseline, candidate, rounds, min_seconds), params)


def time_rows(rows: list[Row]) -> list[tuple[str, str, str, str]]:
    """Rows as printed: both times and the candidate/baseline ratio (lower is better)."""
    return [(r.name, fmt_time(r.baseline), fmt_time(r.candidate), f"{r.ratio:5.2f}x") for r in rows]


def speed_rows(rows: list[Row]) -> list[tuple[str, str, str, str]]:
    """Rows as printed: both times and the baseline/candidate ratio (higher is better)."""
    return [(r.name, fmt_time(r.baseline), fmt_time(r.candidate), f"{1 / r.ratio:5.2f}") for r in rows]


def time_per_call(fn: Callable[[], object], min_seconds: float | None = None) -> float:
    """Seconds per call of fn, timed over enough calls to last min_seconds."""
    min_seconds = SETTINGS["min_seconds"] if min_seconds is None else min_seconds
    fn()
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls
        calls *= 2 if elapsed == 0 else max(2, int(min_seconds / elapsed * 1.2))


def compare(
    baseline: Callable[[], object],
    candidate: Callable[[], object],
    rounds: int | None = None,
    min_seconds: float | None = None,
) -> tuple[float, float, float]:
    """Median seconds per call of baseline and candidate, and the median of their per-round ratios
    (candidate / baseline). The two are timed back to back in each round, so a ratio compares
    measurements taken under the same machine load. `min_seconds` sets how long each timing lasts
    (quick runs keep their own, shorter one)."""
    a, b = [], []
    rounds = SETTINGS["rounds"] if rounds is None else min(rounds, SETTINGS["rounds"])
    min_seconds = None if quick() else min_seconds
    for _ in range(rounds):
        a.append(time_per_call(baseline, min_seconds))
        b.append(time_per_call(candidate, min_seconds))
    return statistics.median(a), statistics.median(b), statistics.median(y / x for x, y in zip(a, b, strict=True))


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:7.2f} {unit}"
    return f"{seconds / 1e-9:7.0f} ns"


def print_table(title: str, rows: list[tuple[str, ...]], headers: tuple[str, ...]) -> None:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    print(f"\n{title}")
    for row in [headers, *rows]:
        print(
            "  " + "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row))
        )


# Names of the OpenCL devices that compute on this machine's CPU cores: PoCL's CPU devices.
HOST_CORE_DEVICES = ("pthread-", "cpu-", "basic-", "tbb-")


def set_cpu_threads(device: str) -> None:
    """Sets the CPU side's intra-op threads. A device that computes on this machine's own cores (an
    OpenCL CPU device such as PoCL's) competes with the CPU's threads for them, so the CPU side then
    runs on one thread: each side has the cores while it runs, and the ratio compares the two
    implementations rather than who got the cores. BENCH_CPU_THREADS sets the count explicitly."""
    threads = os.environ.get("BENCH_CPU_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    elif torch.get_device_module(device).get_device_name().startswith(HOST_CORE_DEVICES):
        torch.set_num_threads(1)


def print_setup(device: str) -> None:
    """Sets the CPU threads (set_cpu_threads) and prints the line that makes a run's figures
    comparable with another's: torch, CPU threads, device."""
    set_cpu_threads(device)
    name = torch.get_device_module(device).get_device_name()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, device {name}")


def with_async_fallback(device: str, fn: Callable[[], object], enabled: bool) -> Callable[[], object]:
    """fn with the device's asynchronous CPU fallback on or off while it runs, off afterwards."""
    module = torch.get_device_module(device)

    def run() -> object:
        module.set_async_fallback(enabled)
        try:
            return fn()
        finally:
            module.set_async_fallback(False)

    return run

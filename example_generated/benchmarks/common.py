"""Side-by-side timing helpers: the machines these run on are noisy, so every figure is a ratio
of two measurements interleaved in the same run, never an absolute threshold."""

import statistics
import time
from collections.abc import Callable

import torch


def time_per_call(fn: Callable[[], object], min_seconds: float = 0.02) -> float:
    """Seconds per call of fn, timed over enough calls to last min_seconds."""
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
    baseline: Callable[[], object], candidate: Callable[[], object], rounds: int = 9
) -> tuple[float, float, float]:
    """Median seconds per call of baseline and candidate, and the median of their per-round ratios
    (candidate / baseline). The two are timed back to back in each round, so a ratio compares
    measurements taken under the same machine load."""
    a, b = [], []
    for _ in range(rounds):
        a.append(time_per_call(baseline))
        b.append(time_per_call(candidate))
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


def print_setup(device: str) -> None:
    """The line that makes a run's figures comparable with another's: torch, CPU threads, device."""
    name = torch.get_device_module(device).get_device_name()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, device {name}")

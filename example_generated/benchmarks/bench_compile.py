"""What torch.compile gains on foo, next to what it gains on the CPU, in one run.

    python benchmarks/bench_compile.py

For each model, a training step (forward, backward, SGD) runs eagerly and compiled, on the CPU and on
the device; eager and compiled are timed back to back, so each speedup compares measurements under the
same load. The goal: the device keeps at least 90% of the CPU's speedup (the last column). The second
table is the first compile of each model (forward and backward graphs), on each device, after a
warm-up compile that builds Inductor's precompiled header; the compile cache is a fresh temporary
directory, so nothing comes from earlier runs.
"""

import copy
import os
import tempfile
import time

import torch
import torch.nn as nn
from common import compare, fmt_time, print_setup, print_table

import torch_foo  # noqa: F401

DEVICE = "foo"


def models() -> dict[str, tuple[nn.Module, torch.Tensor]]:
    torch.manual_seed(0)
    return {
        "MLP 256-512-512-10, batch 64": (
            nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10)),
            torch.randn(64, 256),
        ),
        "Transformer layer d=128, batch 8x32": (
            nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True),
            torch.randn(8, 32, 128),
        ),
    }


def make_step(model: nn.Module, x: torch.Tensor, device: str, compiled: bool):
    """A training step that returns when its work is done (the device's runs asynchronously)."""
    model = copy.deepcopy(model).to(device)
    x = x.to(device)
    if compiled:
        # Every compiled module runs through one frame (nn.Module's call), so without a reset a second
        # model would be a recompile of the first: Dynamo would trace it with dynamic shapes, and past
        # its recompile limit run it eagerly. Each compiled step starts afresh, as in its own process.
        torch._dynamo.reset()
    forward = torch.compile(model) if compiled else model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    finish = torch.get_device_module(device).synchronize

    def step() -> None:
        optimizer.zero_grad()
        forward(x).square().mean().backward()
        optimizer.step()
        finish()

    return step


def speedups() -> list[tuple[str, str, str, str]]:
    rows = []
    for name, (model, x) in models().items():
        gains = {}
        for device in ("cpu", DEVICE):
            eager, compiled, ratio = compare(
                make_step(model, x, device, False), make_step(model, x, device, True), rounds=5
            )
            gains[device] = 1 / ratio
            rows.append((f"{name}, {device}", fmt_time(eager), fmt_time(compiled), f"{gains[device]:5.2f}x", ""))
        rows[-1] = (*rows[-1][:4], f"{gains[DEVICE] / gains['cpu']:6.0%}")
    return rows


def first_compiles() -> list[tuple[str, str, str, str]]:
    rows = []
    for device in ("cpu", DEVICE):  # warm-up: imports, worker pool, precompiled header
        torch.compile(lambda t: t.sin() + 1)(torch.ones(8, device=device))
    for name, (model, x) in models().items():
        seconds = {}
        for device in ("cpu", DEVICE):
            step = make_step(model, x, device, True)
            start = time.perf_counter()
            step()
            seconds[device] = time.perf_counter() - start
        rows.append(
            (name, f"{seconds['cpu']:6.1f} s", f"{seconds[DEVICE]:6.1f} s", f"{seconds[DEVICE] / seconds['cpu']:5.2f}x")
        )
    return rows


def print_speedups(rows: list[tuple[str, str, str, str, str]]) -> None:
    headers = ("model, device", "eager step", "compiled step", "speedup", f"{DEVICE} keeps")
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(5)]
    print("\nTraining step, eager and compiled (speedup = eager / compiled; goal: the device keeps >= 90%)")
    for row in [headers, *rows]:
        print("  " + "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))


def main() -> None:
    print_setup(DEVICE)
    with tempfile.TemporaryDirectory(prefix="inductor-bench-") as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        print_table(
            "First compile of a training step (forward and backward graphs, cold cache)",
            first_compiles(),
            ("model", "cpu", DEVICE, f"{DEVICE}/cpu"),
        )
        print_speedups(speedups())


if __name__ == "__main__":
    main()

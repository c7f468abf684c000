"""Training costs on foo against the same work on the CPU, in one run.

    python benchmarks/bench_training.py

Random numbers: native Philox kernels (rand, randn, dropout) against the CPU generator. Training
steps: forward, backward and an Adam step of small models, with and without autocast; most of their
operators still run on the CPU fallback, which the last table lists: the kernels worth writing first.
The CNN's step (batch norm and its backward, max pooling, adaptive average pooling run on the fallback)
also with the asynchronous fallback (torch.foo.set_async_fallback) on and off, side by side.
"""

import copy
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import Row, measure, print_setup, print_table, quick, time_rows, with_async_fallback

import torch_foo

DEVICE = "foo"


def synchronized(fn, device):
    """fn(device), waited for: a device's work is asynchronous, and a queue that accepts work faster
    than the device runs it would otherwise time only the enqueueing."""
    result = fn(device)
    torch.foo.synchronize()
    return result


def random_costs() -> list[Row]:
    rows = []
    n = 1 << 20
    cases = {
        "rand, 1M floats": lambda d: torch.rand(n, device=d),
        "randn, 1M floats": lambda d: torch.randn(n, device=d),
        "randint, 1M int64": lambda d: torch.randint(0, 1000, (n,), device=d),
        "dropout(p=0.1), 1M floats": partial(
            lambda x, d: F.dropout(x[d], 0.1), {"cpu": torch.ones(n), DEVICE: torch.ones(n, device=DEVICE)}
        ),
    }
    for name, fn in cases.items():
        rows.append(measure(name, partial(fn, "cpu"), partial(synchronized, fn, DEVICE)))
    return rows


def models():
    torch.manual_seed(0)
    return {
        "MLP 256-512-512-10, batch 64": (
            nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)),
            torch.randn(64, 256),
            torch.randint(0, 10, (64,)),
        ),
        "CNN conv-bn-pool x2, batch 16x3x32x32": (
            nn.Sequential(
                nn.Conv2d(3, 16, 3, padding=1),
                nn.BatchNorm2d(16),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1),
                nn.BatchNorm2d(32),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(32, 10),
            ),
            torch.randn(16, 3, 32, 32),
            torch.randint(0, 10, (16,)),
        ),
        "LSTM 2x128, batch 16, 20 steps": (
            nn.LSTM(64, 128, num_layers=2, batch_first=True),
            torch.randn(16, 20, 64),
            torch.randn(16, 20, 128),
        ),
        "Transformer layer d=128, batch 8x32": (
            nn.TransformerEncoderLayer(128, 4, 256, batch_first=True),
            torch.randn(8, 32, 128),
            torch.randn(8, 32, 128),
        ),
    }


def make_step(model, x, target, device, dtype=None):
    model = copy.deepcopy(model).to(device)
    x, target = x.to(device), target.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = F.cross_entropy if target.dtype == torch.int64 else F.mse_loss

    def step():
        optimizer.zero_grad()
        with torch.autocast(torch.device(device).type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            out = model(x)
            out = out[0] if isinstance(out, tuple) else out
            loss = loss_fn(out.float(), target)
        loss.backward()
        optimizer.step()
        if device != "cpu":
            torch.foo.synchronize()  # the step's last work, as the CPU's step ends with it

    return step


def training_costs() -> list[Row]:
    """One step on the CPU (baseline) and on the device; params: model, autocast. A step takes a few
    milliseconds: each timing lasts 0.2 s (about 40 steps), or the ratio of the MLP's step swings
    from 1.0x to 1.3x between runs on a 2-core machine."""
    rows = []
    for name, (model, x, target) in list(models().items())[: 1 if quick() else None]:
        for label, dtype in (("", None), (", autocast bf16", torch.bfloat16)):
            cpu, dev = make_step(model, x, target, "cpu", dtype), make_step(model, x, target, DEVICE, dtype)
            rows.append(measure(name + label, cpu, dev, min_seconds=0.2, model=name, autocast=dtype is not None))
    return rows


def async_fallback_costs() -> tuple[list[Row], Row]:
    """The CNN's step on the CPU (baseline) and on the device with the asynchronous fallback off, then on;
    and the device's step with it on against off, timed back to back."""
    name = "CNN conv-bn-pool x2, batch 16x3x32x32"
    model, x, target = models()[name]
    cpu = make_step(model, x, target, "cpu")
    steps = {
        enabled: with_async_fallback(DEVICE, make_step(model, x, target, DEVICE), enabled) for enabled in (False, True)
    }
    rows = [
        measure(f"CNN step, asynchronous fallback {'on' if enabled else 'off'}", cpu, step, min_seconds=0.2)
        for enabled, step in steps.items()
    ]
    return rows, measure("CNN step on the device", steps[False], steps[True], min_seconds=0.2)


def main() -> None:
    print_setup(DEVICE)
    print_table(
        "Random numbers (lower ratio is better)",
        time_rows(random_costs()),
        ("operation", "cpu", DEVICE, f"{DEVICE}/cpu"),
    )
    print_table(
        "One training step: forward, backward, Adam (lower ratio is better)",
        time_rows(training_costs()),
        ("model", "cpu", DEVICE, f"{DEVICE}/cpu"),
    )
    against_cpu, on_against_off = async_fallback_costs()
    print_table(
        "The CNN's step with the asynchronous CPU fallback off and on (lower ratio is better)",
        time_rows(against_cpu),
        ("step", "cpu", DEVICE, f"{DEVICE}/cpu"),
    )
    print_table(
        "The same step with the asynchronous fallback on against off (lower ratio is better)",
        time_rows([on_against_off]),
        ("step", "off", "on", "on/off"),
    )
    paths = torch_foo.fallback_paths()
    queued = sorted(name.removeprefix("aten::") for name, calls in paths.items() if calls["async"])
    print(f"\nOperators the asynchronous fallback queued: {', '.join(queued) or 'none'}")
    ops = torch.foo.fallback_ops()
    print(f"\n{len(ops)} operators ran on the CPU fallback during these steps:")
    print("  " + ", ".join(name.removeprefix("aten::") for name in ops))


if __name__ == "__main__":
    main()

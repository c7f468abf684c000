"""Operator and copy costs on foo against the same work on the CPU, in one run.

    python benchmarks/bench_ops.py

Dispatch: a 4-element add runs the native kernel path (type promotion, TensorIterator, launch);
a 4-element sin runs the CPU fallback (two copies per tensor). Copies: host-to-device and
device-to-host into preallocated buffers against a CPU-to-CPU copy of the same size; a ratio of
1.0 means the device path moves data as fast as the CPU copy does.
"""

from functools import partial

import torch
from common import compare, fmt_time, print_setup, print_table

import torch_foo  # noqa: F401

DEVICE = "foo"


def dispatch_costs() -> list[tuple[str, str, str, str]]:
    rows = []
    cases = {
        "add, 4 elements (native)": lambda x, y: x + y,
        "mul by a Python number (native)": lambda x, y: x * 2.5,
        "in-place add_ (native)": lambda x, y: x.add_(y),
        "sin, 4 elements (CPU fallback)": lambda x, y: torch.sin(x),
    }
    for name, op in cases.items():
        cx, cy = torch.randn(4), torch.randn(4)
        dx, dy = cx.to(DEVICE), cy.to(DEVICE)
        cpu, dev, ratio = compare(partial(op, cx, cy), partial(op, dx, dy))
        rows.append((name, fmt_time(cpu), fmt_time(dev), f"{ratio:5.2f}x"))
    return rows


def copy_bandwidth() -> list[tuple[str, str, str, str]]:
    rows = []
    for size in (64 << 10, 1 << 20, 16 << 20, 64 << 20):
        numel = size // 4
        src_cpu = torch.randn(numel)
        dst_cpu = torch.empty(numel)
        dst_dev = torch.empty(numel, device=DEVICE)
        src_dev = src_cpu.to(DEVICE)
        label = f"{size >> 10} KiB" if size < (1 << 20) else f"{size >> 20} MiB"
        for direction, copy in (
            ("host to device", partial(dst_dev.copy_, src_cpu)),
            ("device to host", partial(dst_cpu.copy_, src_dev)),
        ):
            cpu, dev, ratio = compare(partial(dst_cpu.copy_, src_cpu), copy)
            gib = size / 2**30
            rows.append(
                (f"{direction}, {label}", f"{gib / cpu:6.1f} GiB/s", f"{gib / dev:6.1f} GiB/s", f"{1 / ratio:5.2f}")
            )
    return rows


def main() -> None:
    print_setup(DEVICE)
    print_table(
        "Per-call cost (lower ratio is better; 1.00x = same as CPU)",
        dispatch_costs(),
        ("operation", "cpu", DEVICE, f"{DEVICE}/cpu"),
    )
    print_table(
        "Copy bandwidth into preallocated buffers (ratio = device speed / CPU copy speed)",
        copy_bandwidth(),
        ("copy", "cpu to cpu", DEVICE, "ratio"),
    )


if __name__ == "__main__":
    main()

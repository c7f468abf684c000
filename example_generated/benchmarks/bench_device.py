"""What the emulated device's machinery costs, against the CPU, measured side by side in one run.

    python benchmarks/bench_device.py

Allocation: allocating a tensor and copying into it, against copying into a preallocated one. After
warm-up the caching allocator serves the allocation from its cache, so the two should cost the same
(ratio 1.00); the CPU column is the same pair with the CPU allocator, for reference.
Launch: small native operators, which the host enqueues on the current stream and the stream's
worker thread runs, against the same operators on the CPU.
Synchronisation: the host-side cost of synchronize, queries and events on an idle device, and of a
launch followed by a synchronize (a round trip to the stream's worker), each against a 4-element
CPU add.
Pinned memory: non_blocking copies from and to pinned memory (then synchronize) against the
blocking copies from and to pageable memory.
"""

from functools import partial

import torch
from common import Row, measure, print_setup, print_table, quick, speed_rows, time_rows

import torch_foo  # noqa: F401

DEVICE = "foo"
DEVICE_0 = torch.device(DEVICE, 0)  # parsed once: a device string costs more to parse than a copy of 64 KiB
SIZES = (64 << 10, 1 << 20, 16 << 20, 64 << 20)


def label(size: int) -> str:
    return f"{size >> 10} KiB" if size < (1 << 20) else f"{size >> 20} MiB"


def fresh_copy(numel: int, src: torch.Tensor, device: torch.device | None) -> torch.Tensor:
    return torch.empty(numel, device=device).copy_(src)


def allocation() -> list[Row]:
    """Copying into a fresh tensor (baseline: into a preallocated one); params: device, bytes."""
    rows = []
    for size in SIZES[:2] if quick() else SIZES:
        numel = size // 4
        src = torch.randn(numel)
        dst_cpu, dst_dev = torch.empty(numel), torch.empty(numel, device=DEVICE)
        for device, name, preallocated, fresh in (
            (
                DEVICE,
                f"{DEVICE}: host to device",
                partial(dst_dev.copy_, src),
                partial(fresh_copy, numel, src, DEVICE_0),
            ),
            ("cpu", "cpu: host to host", partial(dst_cpu.copy_, src), partial(fresh_copy, numel, src, None)),
        ):
            rows.append(measure(f"{name}, {label(size)}", preallocated, fresh, device=device, bytes=size))
    return rows


def launch() -> list[Row]:
    cases = {
        "add, 4 elements": lambda x, y: x + y,
        "mul by a Python number": lambda x, y: x * 2.5,
        "in-place add_": lambda x, y: x.add_(y),
        "fill_": lambda x, y: x.fill_(1.5),
        "add, 64 Ki elements": lambda x, y: x + y,
    }
    rows = []
    for name, op in cases.items():
        n = 65536 if "64 Ki" in name else 4
        cx, cy = torch.randn(n), torch.randn(n)
        dx, dy = cx.to(DEVICE), cy.to(DEVICE)
        rows.append(measure(name, partial(op, cx, cy), partial(op, dx, dy)))
    torch.foo.synchronize()
    return rows


def synchronisation() -> list[Row]:
    cx, cy = torch.randn(4), torch.randn(4)
    dx = cx.to(DEVICE)
    stream = torch.foo.current_stream()
    side = torch.foo.Stream()
    plain, timed = torch.foo.Event(), torch.foo.Event(enable_timing=True)
    start, end = torch.foo.Event(enable_timing=True), torch.foo.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()

    def launch_and_synchronize():
        dx.add_(1)
        stream.synchronize()

    def record_and_synchronize():
        plain.record()
        plain.synchronize()

    def stream_context():
        with torch.foo.stream(side):
            pass

    cases = {
        "torch.foo.synchronize(), idle": torch.foo.synchronize,
        "stream.query(), idle": stream.query,
        "add_ then stream.synchronize()": launch_and_synchronize,
        "event.record()": plain.record,
        "event.record(), enable_timing": timed.record,
        "event.query()": plain.query,
        "event.record() then synchronize()": record_and_synchronize,
        "start.elapsed_time(end)": partial(start.elapsed_time, end),
        "with torch.foo.stream(s): pass": stream_context,
        "torch.foo.current_stream()": torch.foo.current_stream,
    }
    rows = []
    for name, fn in cases.items():
        rows.append(measure(name, partial(torch.add, cx, cy), fn))
    return rows


def copy_and_synchronize(dst: torch.Tensor, src: torch.Tensor) -> None:
    dst.copy_(src, non_blocking=True)
    torch.foo.synchronize()


def pinned() -> list[Row]:
    rows = []
    for size in (1 << 20, 16 << 20):
        numel = size // 4
        pageable, pinned_host = torch.randn(numel), torch.randn(numel).pin_memory()
        on_device = torch.empty(numel, device=DEVICE)
        for direction, blocking, asynchronous in (
            (
                "host to device",
                partial(on_device.copy_, pageable),
                partial(copy_and_synchronize, on_device, pinned_host),
            ),
            (
                "device to host",
                partial(pageable.copy_, on_device),
                partial(copy_and_synchronize, pinned_host, on_device),
            ),
        ):
            rows.append(measure(f"{direction}, {label(size)}", blocking, asynchronous))
    return rows


def main() -> None:
    print_setup(DEVICE)
    print_table(
        "Allocation plus copy against a copy into a preallocated buffer (ratio = preallocated / fresh)",
        speed_rows(allocation()),
        ("copy", "preallocated", "fresh", "ratio"),
    )
    print_table(
        "Launch cost of small native operators (lower ratio is better; 1.00x = same as CPU)",
        time_rows(launch()),
        ("operation", "cpu", DEVICE, f"{DEVICE}/cpu"),
    )
    print_table(
        "Synchronisation and event overheads on an idle device, against a 4-element CPU add",
        time_rows(synchronisation()),
        ("operation", "cpu add", DEVICE, "ratio"),
    )
    print_table(
        "Copies with pinned memory, non_blocking then synchronize (ratio = pageable time / pinned time)",
        speed_rows(pinned()),
        ("copy", "pageable", "pinned", "ratio"),
    )


if __name__ == "__main__":
    main()

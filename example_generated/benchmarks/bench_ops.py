"""Operator and copy costs on foo against the same work on the CPU, in one run.

    python benchmarks/bench_ops.py

Dispatch: a 4-element add runs the native kernel path (type promotion, TensorIterator, launch);
a 4-element sin runs the CPU fallback (two copies per tensor), on its synchronous path and on its
asynchronous one (torch.foo.set_async_fallback: a hundred calls queued, then one
synchronisation, against a hundred on the CPU). Copies: host-to-device and
device-to-host from and to pageable and pinned memory, and device-to-device, into preallocated
buffers (an asynchronous copy then synchronises) against a CPU-to-CPU copy of the same size; a ratio
of 1.0 means the device path moves data as fast as the CPU copy does. Sparse:
sparse @ dense, coalesce, COO to CSR and sampled_addmm, which run on the CPU fallback.
"""

import warnings
from functools import partial

import torch
from common import Row, measure, print_setup, print_table, quick, time_rows, with_async_fallback

import torch_foo  # noqa: F401

DEVICE = "foo"
COPY_SIZES = (64 << 10, 1 << 20, 16 << 20, 64 << 20)


def size_label(size: int) -> str:
    return f"{size >> 10} KiB" if size < (1 << 20) else f"{size >> 20} MiB"


def dispatch_costs() -> list[Row]:
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
        rows.append(measure(name, partial(op, cx, cy), partial(op, dx, dy)))
    cx = torch.randn(4)
    dx = cx.to(DEVICE)
    for label, enabled in (("synchronous", False), ("asynchronous", True)):
        rows.append(
            measure(
                f"sin, 4 elements, 100 calls then a synchronisation ({label} CPU fallback)",
                partial(hundred_sins, cx),
                with_async_fallback(DEVICE, partial(hundred_sins, dx), enabled),
            )
        )
    return rows


def hundred_sins(x: torch.Tensor) -> None:
    for _ in range(100):
        torch.sin(x)
    if x.device.type == DEVICE:
        torch.foo.synchronize()


def copy_and_synchronize(dst: torch.Tensor, src: torch.Tensor) -> None:
    dst.copy_(src, non_blocking=True)
    torch.foo.synchronize()


def copy_bandwidth() -> list[Row]:
    """Each copy direction against a CPU-to-CPU copy of the same size; params: direction, bytes.
    Asynchronous copies (pinned host memory, device to device) are followed by a synchronisation,
    so that each row times the whole copy."""
    rows = []
    for size in COPY_SIZES[:2] if quick() else COPY_SIZES:
        numel = size // 4
        src_cpu = torch.randn(numel)
        dst_cpu = torch.empty(numel)
        pinned = torch.randn(numel).pin_memory()
        dst_dev = torch.empty(numel, device=DEVICE)
        src_dev = src_cpu.to(DEVICE)
        other_dev = torch.empty(numel, device=DEVICE)
        for direction, copy in (
            ("host to device", partial(dst_dev.copy_, src_cpu)),
            ("device to host", partial(dst_cpu.copy_, src_dev)),
            ("pinned host to device", partial(copy_and_synchronize, dst_dev, pinned)),
            ("device to pinned host", partial(copy_and_synchronize, pinned, src_dev)),
            ("device to device", partial(copy_and_synchronize, other_dev, src_dev)),
        ):
            name = f"{direction}, {size_label(size)}"
            rows.append(measure(name, partial(dst_cpu.copy_, src_cpu), copy, direction=direction, bytes=size))
    return rows


def bandwidth_rows(rows: list[Row]) -> list[tuple[str, str, str, str]]:
    def gibs(nbytes: int, seconds: float) -> str:
        return f"{nbytes / 2**30 / seconds:6.1f} GiB/s"

    return [
        (r.name, gibs(r.params["bytes"], r.baseline), gibs(r.params["bytes"], r.candidate), f"{1 / r.ratio:5.2f}")
        for r in rows
    ]


def sparse_costs() -> list[Row]:
    """Sparse operators on the device run on the CPU's sparse kernels through the fallback: the
    ratio is the price of copying every operand to the host and the result back."""
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    g = torch.Generator().manual_seed(0)
    dense = torch.randn(1024, 1024, generator=g) * (torch.rand(1024, 1024, generator=g) < 0.01)
    coo_cpu = dense.to_sparse()
    csr_cpu = dense.to_sparse_csr()
    rhs_cpu = torch.randn(1024, 64, generator=g)
    a_cpu, b_cpu = torch.randn(1024, 32, generator=g), torch.randn(32, 1024, generator=g)
    cases = {
        "sparse (1% of 1024x1024) @ dense 1024x64": lambda s, c, r, a, b: torch.sparse.mm(s, r),
        "coalesce of the same COO tensor": lambda s, c, r, a, b: s._coalesced_(False).coalesce(),
        "COO to CSR": lambda s, c, r, a, b: s.to_sparse_csr(),
        "CSR @ dense 1024x64": lambda s, c, r, a, b: c @ r,
        "sampled_addmm on the CSR pattern (32-wide factors)": lambda s, c, r, a, b: torch.sparse.sampled_addmm(c, a, b),
    }
    rows = []
    on_device = [t.to(DEVICE) for t in (coo_cpu, csr_cpu, rhs_cpu, a_cpu, b_cpu)]
    for name, op in cases.items():
        rows.append(measure(name, partial(op, coo_cpu, csr_cpu, rhs_cpu, a_cpu, b_cpu), partial(op, *on_device)))
    return rows


def main() -> None:
    print_setup(DEVICE)
    print_table(
        "Per-call cost (lower ratio is better; 1.00x = same as CPU)",
        time_rows(dispatch_costs()),
        ("operation", "cpu", DEVICE, f"{DEVICE}/cpu"),
    )
    print_table(
        "Copy bandwidth into preallocated buffers (ratio = device speed / CPU copy speed)",
        bandwidth_rows(copy_bandwidth()),
        ("copy", "cpu to cpu", DEVICE, "ratio"),
    )
    print_table(
        "Sparse operators (CPU fallback with the CPU's sparse kernels; lower ratio is better)",
        time_rows(sparse_costs()),
        ("operation", "cpu", DEVICE, f"{DEVICE}/cpu"),
    )


if __name__ == "__main__":
    main()

"""all_reduce bandwidth of fooccl on foo tensors against Gloo on CPU tensors of the same size.

    python benchmarks/bench_distributed.py [--world-size 2]

Starts the ranks on this host (one per device) in one process group "cpu:gloo,foo:fooccl":
CPU tensors go to torch's own Gloo backend, foo tensors to fooccl, which exchanges them with
Gloo as well: in place when the driver says the host may access device memory (the emulated device
outside strict memory mode; FOO_STRICT_MEMORY=1 measures the staged path instead), else
staged through pinned host memory. So the ratio is what the device path costs on top of Gloo
itself: the stream ordering, the check that all ranks make the same call (by default only where
the calls before do not predict the call: here, the first call of each size), and the copies to
and from device memory where it stages. The last column checks every call
(FOO_CCL_CHECK_CALLS=all, as TORCH_DISTRIBUTED_DEBUG=DETAIL does), to show what
that costs. Bandwidth is the tensor's size over the time of
one all_reduce (sum, float32), the median of interleaved rounds; the device's time includes the
copy of the result back into device memory (torch.foo.synchronize).
"""

import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from common import fmt_time, print_setup, print_table

import torch_foo  # noqa: F401

DEVICE = "foo"
# Size in bytes -> all_reduce calls per timing (each timing lasts tens of milliseconds or more).
SIZES = {64 << 10: 40, 1 << 20: 16, 4 << 20: 8, 16 << 20: 4, 64 << 20: 2}
ROUNDS = 5


def label(size: int) -> str:
    return f"{size >> 10} KiB" if size < (1 << 20) else f"{size >> 20} MiB"


def seconds_per_all_reduce(tensor: torch.Tensor, calls: int, group: dist.ProcessGroup | None = None) -> float:
    """Every rank runs the same calls: the counts are fixed, never adapted per rank."""
    dist.barrier()
    if tensor.device.type == DEVICE:
        torch.foo.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(tensor, group=group)
    if tensor.device.type == DEVICE:
        torch.foo.synchronize()
    return (time.perf_counter() - start) / calls


def bandwidth(size: int, times: list[float]) -> str:
    return f"{fmt_time(statistics.median(times))} {size / (1 << 30) / statistics.median(times):6.2f} GiB/s"


def ratio(cpu_times: list[float], device_times: list[float]) -> str:
    """Device bandwidth over CPU bandwidth, the median of the per-round ratios."""
    return f"{statistics.median(c / d for c, d in zip(cpu_times, device_times, strict=True)):5.2f}"


def rank_main(rank: int, world_size: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.foo.set_device(rank)
    dist.init_process_group(f"cpu:gloo,{DEVICE}:fooccl", rank=rank, world_size=world_size)
    os.environ["FOO_CCL_CHECK_CALLS"] = "all"  # read when a group is created
    every_call_checked = dist.new_group(backend="fooccl")
    del os.environ["FOO_CCL_CHECK_CALLS"]
    if rank == 0:
        print_setup(DEVICE)
        print(f"{world_size} ranks on this host, one {DEVICE} device each; all_reduce (sum) of float32 tensors")
        in_place = torch.foo.get_device_properties(0).host_accesses_device_memory
        path = "in place (the host accesses device memory)" if in_place else "staged through pinned host memory"
        print(f"fooccl reaches device memory {path}")
    rows = []
    for size, calls in SIZES.items():
        cpu = torch.ones(size // 4)
        device = torch.ones(size // 4, device=torch.device(DEVICE, rank))
        seconds_per_all_reduce(cpu, 1)  # warm up: connections, pinned buffers, allocator caches
        seconds_per_all_reduce(device, 1)
        seconds_per_all_reduce(device, 1, every_call_checked)
        cpu_times, device_times, checked_times = [], [], []
        for _ in range(ROUNDS):
            cpu_times.append(seconds_per_all_reduce(cpu, calls))
            device_times.append(seconds_per_all_reduce(device, calls))
            checked_times.append(seconds_per_all_reduce(device, calls, every_call_checked))

        rows.append(
            (
                label(size),
                bandwidth(size, cpu_times),
                bandwidth(size, device_times),
                ratio(cpu_times, device_times),
                bandwidth(size, checked_times),
                ratio(cpu_times, checked_times),
            )
        )
    if rank == 0:
        print_table(
            "all_reduce bandwidth, side by side (ratio: device bandwidth / Gloo CPU bandwidth, median of rounds)",
            rows,
            ("size", "gloo, cpu tensors", f"fooccl, {DEVICE}", "ratio", "every call checked", "ratio"),
        )
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=min(2, torch.foo.device_count()))
    args = parser.parse_args()
    if args.world_size < 2:
        found = torch.foo.device_count()
        raise SystemExit(f"needs 2 or more {DEVICE} devices ({DEVICE.upper()}_DEVICE_COUNT), found {found}")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(rank_main, args=(args.world_size, port), nprocs=args.world_size)


if __name__ == "__main__":
    main()

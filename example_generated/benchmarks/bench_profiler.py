"""What profiling costs on foo against what it costs on the CPU, in one run.

    python benchmarks/bench_profiler.py

Small workloads run without a profiler and inside an active torch.profiler session: on the CPU
recording CPU activity; on the device recording CPU activity only, then CPU and device activity
(every kernel, copy and runtime call, stamped by the runtime's tracing). Times are the CPU time of
the calling thread per step (time.thread_time): that is where the profiler's recording happens, and
unlike wall time it does not count the time a shared machine spends running other processes.

"added ratio" compares what full profiling adds on the device with what CPU profiling adds on the
CPU. Operators that run on the CPU fallback are several operators each (copies to and from the host),
all of which PyTorch's profiler records: compare "device only" (what the device's tracing adds on
top of CPU activity) to see the tracing's own cost. The time to stop the profiler (flush the records,
turn them into trace events, PyTorch's own processing included) is shown for both devices.
"""

import copy
import statistics
import time

import torch
import torch.nn as nn
from common import fmt_time, print_setup, print_table, quick
from torch.profiler import ProfilerActivity, profile

import torch_foo  # noqa: F401

DEVICE = "foo"


def workloads():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def elementwise(device):
        x = torch.randn(256, device=device)

        def step():
            y = x * 2 + 1
            y.mul_(0.5).add_(x)

        return step

    def model_step(train: bool):
        def make(device):
            model = copy.deepcopy(mlp).to(device)
            x = torch.randn(16, 64, device=device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

            def step():
                if train:
                    optimizer.zero_grad()
                    model(x).square().mean().backward()
                    optimizer.step()
                else:
                    with torch.no_grad():
                        model(x)

            return step

        return make

    return {
        "4 native elementwise operators, 256 floats": elementwise,
        "MLP 64-64-10 forward, batch 16": model_step(False),
        "MLP 64-64-10 training step, batch 16": model_step(True),
    }


def cpu_seconds_per_step(step, device: str, calls: int) -> float:
    """Calling-thread CPU seconds per step, the device's work included (it synchronises at the end)."""
    sync = torch.foo.synchronize if device == DEVICE else (lambda: None)
    step()
    sync()
    start = time.thread_time()
    for _ in range(calls):
        step()
    sync()
    return (time.thread_time() - start) / calls


def measure(step, device: str, activities, calls: int) -> tuple[float, float]:
    """(seconds per step, seconds to stop the profiler); no profiler when activities is None."""
    if activities is None:
        return cpu_seconds_per_step(step, device, calls), 0.0
    with profile(activities=activities):
        per_step = cpu_seconds_per_step(step, device, calls)
        stopping = time.perf_counter()
    return per_step, time.perf_counter() - stopping


CASES = {
    "cpu plain": ("cpu", None),
    "cpu profiled": ("cpu", [ProfilerActivity.CPU]),
    "dev plain": (DEVICE, None),
    "dev cpu activity": (DEVICE, [ProfilerActivity.CPU]),
    "dev profiled": (DEVICE, [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]),
}


def profiling_overhead() -> list[dict]:
    """Per workload: median seconds per step of each case over interleaved rounds, the time to stop
    the profiler, and the ratio of the time full profiling adds on the device to what CPU
    profiling adds on the CPU (None when the latter is lost in the noise)."""
    rounds, calls = (2, 20) if quick() else (7, 200)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # OpenMP threads spin while they wait, which counts as CPU time
    try:
        return [
            measure_workload(name, make, rounds, calls)
            for name, make in workloads().items()
            if not (quick() and "training" in name)
        ]
    finally:
        torch.set_num_threads(threads)


def measure_workload(name: str, make, rounds: int, calls: int) -> dict:
    """Median seconds per step of each case over interleaved rounds, stop times, and the ratios."""
    steps = {device: make(device) for device in ("cpu", DEVICE)}
    samples = {key: [] for key in CASES}
    stops = {"cpu stop": [], "dev stop": []}
    for _ in range(rounds):
        for key, (device, activities) in CASES.items():
            per_step, stop = measure(steps[device], device, activities, calls)
            samples[key].append(per_step)
            if key in ("cpu profiled", "dev profiled"):
                stops[key.split()[0] + " stop"].append(stop)
    row = {"name": name, **{key: statistics.median(v) for key, v in {**samples, **stops}.items()}}

    def added(profiled: str, plain: str) -> float:
        return statistics.median(p - q for p, q in zip(samples[profiled], samples[plain], strict=True))

    cpu_added = added("cpu profiled", "cpu plain")
    row["device only"] = added("dev profiled", "dev cpu activity")
    row["added ratio"] = added("dev profiled", "dev plain") / cpu_added if cpu_added > 0 else None
    return row


def ratio_text(ratio: float | None) -> str:
    return "within noise" if ratio is None else f"{ratio:5.2f}"


def main() -> None:
    print_setup(DEVICE)
    rows, stops = [], []
    for r in profiling_overhead():
        stops.append(f"  {r['name']}: cpu {fmt_time(r['cpu stop'])}, {DEVICE} {fmt_time(r['dev stop'])}")
        rows.append(
            (
                r["name"],
                f"{fmt_time(r['cpu plain'])} -> {fmt_time(r['cpu profiled'])}",
                f"{fmt_time(r['dev plain'])} -> {fmt_time(r['dev cpu activity'])} -> {fmt_time(r['dev profiled'])}",
                fmt_time(r["device only"]),
                ratio_text(r["added ratio"]),
            )
        )
    print_table(
        "CPU time per step: no profiler -> CPU activity [-> CPU and device activity]",
        rows,
        ("workload", "cpu", DEVICE, "device only", "added ratio"),
    )
    print("\nStopping the profiler (flushing and processing the trace of all the steps it recorded):")
    print("\n".join(stops))


if __name__ == "__main__":
    main()

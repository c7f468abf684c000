"""Runs the benchmarks and writes a Markdown report with plots, every figure next to the CPU's.

    python -m benchmarks.report [--quick] [--output DIR]      (from the project's root)

Writes DIR/report.md (default benchmark-report/) and one PNG per section: dispatch overhead per
operator class, copy bandwidth against size for each direction, allocator cost, training steps,
compiled against eager execution, and what the profiler costs. The measurements are those of the
bench_*.py scripts (the same functions, the same side-by-side method); --quick runs each of them
briefly, to check that the report works (its numbers are not worth reading).

Needs matplotlib: pip install -e ".[benchmark]". Another benchmark module joins the report by
defining report_sections() -> list[common.Section] (see Section); it is picked up if present.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the scripts import each other as top-level modules

import bench_device  # noqa: E402
import bench_ops  # noqa: E402
import bench_profiler  # noqa: E402
import bench_training  # noqa: E402
import common  # noqa: E402
import torch  # noqa: E402
from common import Row, Section, fmt_time, measure  # noqa: E402

DEVICE = bench_ops.DEVICE
BUILT_IN = {"bench_device", "bench_ops", "bench_profiler", "bench_training"}


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: Path) -> None:
    """Writes a finished figure to path and frees it (pyplot keeps every open figure)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)


def bars(rows: list[Row], path: Path, title: str, labels: tuple[str, str] = ("cpu", DEVICE)) -> None:
    """Horizontal bars: time per call of each row, baseline and candidate side by side."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.55 * len(rows)))
    positions = range(len(rows))
    ax.barh([p + 0.2 for p in positions], [r.baseline * 1e6 for r in rows], 0.4, label=labels[0], color="#999999")
    ax.barh([p - 0.2 for p in positions], [r.candidate * 1e6 for r in rows], 0.4, label=labels[1], color="#e65100")
    ax.set_yticks(list(positions), [r.name for r in rows])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("microseconds per call (log scale, lower is better)")
    ax.set_title(title)
    ax.legend(loc="best")
    save(fig, path)


def bandwidth_plot(rows: list[Row], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    sizes = sorted({r.params["bytes"] for r in rows})
    cpu = [min(r.baseline for r in rows if r.params["bytes"] == size) for size in sizes]
    ax.plot(
        sizes, [size / 2**30 / t for size, t in zip(sizes, cpu, strict=True)], "k--", marker="o", label="cpu to cpu"
    )
    for direction in dict.fromkeys(r.params["direction"] for r in rows):
        points = sorted(
            (r.params["bytes"], r.params["bytes"] / 2**30 / r.candidate)
            for r in rows
            if r.params["direction"] == direction
        )
        ax.plot(*zip(*points, strict=True), marker="o", label=f"{DEVICE}: {direction}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [bench_ops.size_label(size) for size in sizes])
    ax.set_xlabel("bytes per copy")
    ax.set_ylabel("GiB/s (higher is better)")
    ax.set_title("Copy bandwidth into preallocated buffers")
    ax.legend()
    ax.grid(alpha=0.3)
    save(fig, path)


def allocation_plot(rows: list[Row], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for device, color in (("cpu", "#777777"), (DEVICE, "#e65100")):
        points = sorted((r.params["bytes"], r) for r in rows if r.params["device"] == device)
        sizes = [size for size, _ in points]
        ax.set_xticks(sizes, [bench_ops.size_label(size) for size in sizes])
        ax.plot(sizes, [r.candidate * 1e6 for _, r in points], marker="o", color=color, label=f"{device}: fresh tensor")
        ax.plot(
            sizes, [r.baseline * 1e6 for _, r in points], "--", marker="x", color=color, label=f"{device}: preallocated"
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes")
    ax.set_ylabel("microseconds per copy (lower is better)")
    ax.set_title("Allocator cost: copying into a fresh tensor against a preallocated one")
    ax.legend()
    ax.grid(alpha=0.3)
    save(fig, path)


def profiler_plot(results: list[dict], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.9 * len(results)))
    positions = range(len(results))
    bars_of = (
        ("cpu: CPU activity", "cpu profiled", "cpu plain", "#999999"),
        (f"{DEVICE}: CPU activity", "dev cpu activity", "dev plain", "#ffb74d"),
        (f"{DEVICE}: CPU and device activity", "dev profiled", "dev plain", "#e65100"),
    )
    for i, (label, profiled, plain, color) in enumerate(bars_of):
        added = [max(r[profiled] - r[plain], 0) * 1e6 for r in results]
        ax.barh([p + (i - 1) * 0.27 for p in positions], added, 0.27, label=label, color=color)
    ax.set_yticks(list(positions), [r["name"] for r in results])
    ax.invert_yaxis()
    ax.set_xlabel("CPU microseconds the profiler adds per step (lower is better)")
    ax.set_title("Profiling cost")
    ax.legend(loc="best")
    save(fig, path)


def table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def time_table(rows: list[Row], labels: tuple[str, str] = ("cpu", DEVICE)) -> str:
    return table(
        ("", labels[0], labels[1], f"{labels[1]} / {labels[0]}"),
        [(r.name, fmt_time(r.baseline).strip(), fmt_time(r.candidate).strip(), f"{r.ratio:.3g}x") for r in rows],
    )


def compiled_rows() -> tuple[list[Row], list[str]]:
    """Compiled against eager (torch.compile, default backend) for a small MLP on each device."""
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    rows, notes = [], []
    for device in ("cpu", DEVICE):
        m = bench_training.copy.deepcopy(model).to(device)
        x = torch.randn(64, 256, device=device)
        sync = torch.get_device_module(DEVICE).synchronize if device == DEVICE else (lambda: None)

        def eager(m=m, x=x, sync=sync):
            with torch.no_grad():
                m(x)
            sync()

        try:
            compiled_model = torch.compile(m)
            with torch.no_grad():
                compiled_model(x)  # compiles here, outside the timing

            def compiled(compiled_model=compiled_model, x=x, sync=sync):
                with torch.no_grad():
                    compiled_model(x)
                sync()

            rows.append(measure(f"{device}: MLP 256-512-10 forward, batch 64", eager, compiled, device=device))
        except Exception as error:  # the device may have no compiler backend yet
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            notes.append(f"torch.compile on {device} is not available: {type(error).__name__}: {first_line[:200]}")
        finally:
            torch._dynamo.reset()
    return rows, notes


def extra_sections(quick: bool) -> list[Section]:
    """Sections of other benchmark modules (report_sections()), e.g. a compiler benchmark."""
    sections = []
    for path in sorted(HERE.glob("bench_*.py")):
        if path.stem in BUILT_IN:
            continue
        try:
            module = importlib.import_module(path.stem)
            if hasattr(module, "report_sections"):
                sections.extend(module.report_sections())
        except Exception:
            sections.append(Section(f"{path.stem} (failed)", "```\n" + traceback.format_exc() + "```", []))
    return sections


def write_report(output: Path, quick: bool) -> Path:
    output.mkdir(parents=True, exist_ok=True)
    if quick:
        common.set_quick()
    common.set_cpu_threads(DEVICE)
    torch.manual_seed(0)
    device_name = torch.get_device_module(DEVICE).get_device_name()
    parts = [
        f"# Benchmark report: {DEVICE} against the CPU",
        "",
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, device {device_name}, "
        f"{platform.machine()} with {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start, "
        f"{datetime.datetime.now().isoformat(timespec='minutes')}."
        + (" **Quick run (--quick): a smoke test, not numbers to read.**" if quick else ""),
        "",
        "Every figure is measured side by side with the CPU in the same run (benchmarks/common.py: the two "
        "are timed back to back in each round and the median ratio is reported). Produced by "
        "`python -m benchmarks.report`; the plots need matplotlib (the `benchmark` extra of pyproject.toml).",
    ]

    def section(title: str, text: str, body: str, image: str | None = None) -> None:
        parts.extend(["", f"## {title}", "", text, ""])
        if image:
            parts.extend([f"![{title}]({image})", ""])
        parts.append(body)

    dispatch = bench_ops.dispatch_costs()
    dispatch += [r for r in bench_device.launch() if not any(d.name.startswith(r.name) for d in dispatch)]
    bars(dispatch, output / "dispatch.png", "Per-call cost of small operators")
    section(
        "Dispatch overhead per operator class",
        "Native kernels (the host validates, allocates and enqueues; the stream's worker computes), a Python "
        "number as operand, in-place operators, and the CPU fallback (copies to and from the host).",
        time_table(dispatch),
        "dispatch.png",
    )

    copies = bench_ops.copy_bandwidth()
    bandwidth_plot(copies, output / "bandwidth.png")
    section(
        "Copy bandwidth",
        "Copies into preallocated buffers for each direction, from and to pageable and pinned host memory "
        "(an asynchronous copy is followed by a synchronisation), against a CPU-to-CPU copy of the same size.",
        table(
            ("copy", "cpu to cpu", DEVICE, "speed ratio"),
            [(a, b.strip(), c.strip(), d.strip()) for a, b, c, d in bench_ops.bandwidth_rows(copies)],
        ),
        "bandwidth.png",
    )

    allocations = bench_device.allocation()
    allocation_plot(allocations, output / "allocator.png")
    section(
        "Allocator cost",
        "Copying into a freshly allocated tensor against copying into a preallocated one, on the device (the "
        "caching allocator) and on the CPU. A ratio of 1.00 means allocation is free.",
        table(
            ("", "preallocated", "fresh", "preallocated / fresh"),
            [
                (r.name, fmt_time(r.baseline).strip(), fmt_time(r.candidate).strip(), f"{1 / r.ratio:.2f}")
                for r in allocations
            ],
        ),
        "allocator.png",
    )

    steps = bench_training.training_costs()
    bars(steps, output / "training.png", "One training step: forward, backward, Adam")
    section(
        "Training steps",
        "Forward, backward and an Adam step of small models, in float32 and under autocast.",
        time_table(steps),
        "training.png",
    )

    if quick:
        section("Compiled against eager", "Skipped in a quick run (compiling takes minutes).", "")
    else:
        compiled, notes = compiled_rows()
        body = time_table(compiled, ("eager", "compiled")) if compiled else ""
        image = None
        if compiled:
            bars(compiled, output / "compiled.png", "torch.compile against eager", ("eager", "compiled"))
            image = "compiled.png"
        section(
            "Compiled against eager",
            "A forward pass under torch.compile against the same pass in eager mode, on each device."
            + "".join(f"\n\n- {note}" for note in notes),
            body,
            image,
        )

    overhead = bench_profiler.profiling_overhead()
    profiler_plot(overhead, output / "profiler.png")
    section(
        "Profiler cost",
        "CPU time of the calling thread per step without and with an active torch.profiler session: CPU "
        "activity on the CPU; CPU activity, then CPU and device activity on the device. `device only` is what "
        "the device's tracing adds on top of CPU activity; `added ratio` compares what full profiling adds on the "
        "device with what CPU profiling adds on the CPU (operators on the CPU fallback are several operators "
        "each, all recorded). `stop` is the time to stop the profiler and process the trace.",
        table(
            (
                "workload",
                "cpu",
                "cpu profiled",
                DEVICE,
                f"{DEVICE} CPU activity",
                f"{DEVICE} profiled",
                "device only",
                "added ratio",
                "stop: cpu",
                f"stop: {DEVICE}",
            ),
            [
                (
                    r["name"],
                    *(
                        fmt_time(r[key]).strip()
                        for key in (
                            "cpu plain",
                            "cpu profiled",
                            "dev plain",
                            "dev cpu activity",
                            "dev profiled",
                            "device only",
                        )
                    ),
                    bench_profiler.ratio_text(r["added ratio"]).strip(),
                    fmt_time(r["cpu stop"]).strip(),
                    fmt_time(r["dev stop"]).strip(),
                )
                for r in overhead
            ],
        ),
        "profiler.png",
    )

    for extra in extra_sections(quick):
        image = None
        if extra.rows:
            image = f"{extra.slug}.png"
            bars(extra.rows, output / image, extra.title, extra.labels)
        section(extra.title, extra.text, time_table(extra.rows, extra.labels) if extra.rows else "", image)

    report = output / "report.md"
    report.write_text("\n".join(parts) + "\n")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short measurements: checks the report, not the device")
    parser.add_argument(
        "--output", type=Path, default=Path("benchmark-report"), help="directory for report.md and plots"
    )
    args = parser.parse_args()
    print(f"wrote {write_report(args.output, args.quick)}")


if __name__ == "__main__":
    main()

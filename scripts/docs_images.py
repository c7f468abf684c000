"""Draw the pictures of the profiling and memory-debugging pages from a real run of a built backend.

    python scripts/docs_images.py PROJECT_DIR [--out docs/images]

PROJECT_DIR is a rendered and built project for the name foo (scripts/project.py build). The
WORKLOAD below runs there, in the project's own interpreter: two training steps of a small model,
profiled with CPU and device activity and with memory history recorded. This script then draws the
exported Chrome trace (the timeline of the second step: host thread, runtime calls, device
streams, record_function ranges, the arrows from launches to kernels) and the memory history
(bytes held by tensors over the run, by the line of the script that allocated them) with
matplotlib, into profiler-trace.png and memory-timeline.png.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import tempfile
import textwrap
from pathlib import Path

WORKLOAD = textwrap.dedent(
    """
    import sys
    import torch, torch_foo
    from torch.profiler import ProfilerActivity, profile, record_function

    out = sys.argv[1]
    torch.foo.memory._record_memory_history(max_entries=100_000, stacks="python")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to("foo")
    optimizer = torch.optim.Adam(model.parameters())
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

    def step():
        with record_function("data"):
            inputs, targets = x.to("foo"), y.to("foo")
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad()
        return loss.item()

    step()  # warm-up: Adam's state, the caching allocator
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(2):
            with record_function("step"):
                step()
    prof.export_chrome_trace(out + "/trace.json")
    torch.foo.memory._dump_snapshot(out + "/snapshot.pickle")
    torch.foo.memory._record_memory_history(enabled=None)
    """
)

COLORS = {
    "cpu_op": "#9e9e9e",
    "user_annotation": "#7e57c2",
    "privateuse1_runtime": "#4db6ac",
    "kernel": "#ef6c00",
    "gpu_memcpy": "#1e88e5",
    "gpu_memset": "#43a047",
    "gpu_user_annotation": "#7e57c2",
}


def run_workload(project: Path, out: Path) -> None:
    python = project / ".venv" / "bin" / "python"
    script = out / "workload.py"
    script.write_text(WORKLOAD)
    subprocess.run([str(python), str(script), str(out)], check=True, cwd=project, timeout=600)


def top_level(ops: list[dict]) -> list[dict]:
    """Operators not inside another operator of the same thread."""
    result, end = [], -1.0
    for op in sorted(ops, key=lambda e: (e["ts"], -e["dur"])):
        if op["ts"] >= end:
            result.append(op)
            end = op["ts"] + op["dur"]
    return result


def draw_trace(trace_path: Path, image: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = json.loads(trace_path.read_text())["traceEvents"]
    steps = sorted(
        (e for e in events if e.get("cat") == "user_annotation" and e["name"] == "step"), key=lambda e: e["ts"]
    )
    window = (steps[-1]["ts"], steps[-1]["ts"] + steps[-1]["dur"])  # the second step
    inside = [e for e in events if e.get("ph") == "X" and window[0] <= e.get("ts", -1) <= window[1]]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    host = [e for e in inside if e["cat"] in ("cpu_op", "user_annotation", "privateuse1_runtime")]
    rows: list[tuple[str, list[dict]]] = [
        ("record_function", top_level([e for e in host if e["cat"] == "user_annotation" and e["name"] != "step"])),
        ("operators", top_level([e for e in host if e["cat"] == "cpu_op"])),
        ("runtime calls", [e for e in host if e["cat"] == "privateuse1_runtime"]),
    ]
    device = [e for e in inside if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")]
    for track in sorted({(e["pid"], e["tid"]) for e in device}):
        label = f"foo:{track[0]} {names.get(track, 'stream ' + str(track[1]))}"
        ranges = [e for e in device if (e["pid"], e["tid"]) == track and e["cat"] == "gpu_user_annotation"]
        work = [e for e in device if (e["pid"], e["tid"]) == track and e["cat"] != "gpu_user_annotation"]
        rows.append((label + ": ranges", ranges))
        rows.append((label, work))
    start = window[0]
    fig, ax = plt.subplots(figsize=(13, 0.8 + 0.75 * len(rows)))
    y_of = {}
    for y, (_, row) in enumerate(rows):
        for e in row:
            y_of[id(e)] = y
            x, width = (e["ts"] - start) / 1000, max(e["dur"], 0.5) / 1000
            ax.broken_barh(
                [(x, width)], (y - 0.35, 0.7), color=COLORS.get(e["cat"], "#bdbdbd"), edgecolor="white", lw=0.3
            )
            if width > (window[1] - window[0]) / 1000 / 28:
                text = e["name"].removeprefix("aten::").removeprefix("autograd::engine::evaluate_function: ")
                ax.text(x + width / 2, y, text[:18], ha="center", va="center", fontsize=6.5, clip_on=True)
    # Arrows from launches (host) to the kernels they enqueued (device), as the trace viewer draws them.
    flows: dict[int, dict] = {}
    for e in events:
        if e.get("cat") == "ac2g":
            flows.setdefault(e["id"], {})[e["ph"]] = e
    runtime_row, by_position = 2, {(e["pid"], e["tid"], e["ts"]): e for e in device}
    for flow in flows.values():
        if "s" in flow and "f" in flow and window[0] <= flow["f"]["ts"] <= window[1]:
            target = by_position.get((flow["f"]["pid"], flow["f"]["tid"], flow["f"]["ts"]))
            if target is not None and id(target) in y_of:
                x0, x1 = (flow["s"]["ts"] - start) / 1000, (flow["f"]["ts"] - start) / 1000
                ax.annotate(
                    "",
                    (x1, y_of[id(target)] - 0.35),
                    (x0, runtime_row + 0.35),
                    arrowprops={"arrowstyle": "->", "color": "#455a64", "lw": 0.4, "alpha": 0.6},
                )
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, (window[1] - start) / 1000)
    ax.set_xlabel("milliseconds into the training step")
    ax.set_title("torch.profiler trace of one training step on the emulated foo device (export_chrome_trace, drawn)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    ax.legend(handles, list(COLORS), loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=8, ncol=7, frameon=False)
    fig.tight_layout()
    fig.savefig(image, dpi=120)
    plt.close(fig)


def allocation_site(frames: list[dict], script: str) -> str:
    """The line of the workload that allocated, or where the allocation came from without one."""
    lines = WORKLOAD.splitlines()
    for frame in frames:
        if frame["filename"].endswith(script):
            return f"line {frame['line']}: {lines[frame['line'] - 1].strip()[:60]}"
    return "no Python frame (the autograd engine's device thread: backward)"


def draw_memory(snapshot_path: Path, image: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    snapshot = pickle.loads(snapshot_path.read_bytes())
    trace = snapshot["device_traces"][0]
    live: dict[int, tuple[str, int]] = {}
    sites: list[str] = []
    totals: list[dict[str, int]] = []
    for entry in trace:
        if entry["action"] == "alloc":
            site = allocation_site(entry["frames"], "workload.py")
            live[entry["addr"]] = (site, entry["size"])
            if site not in sites:
                sites.append(site)
        elif entry["action"] == "free_completed":
            live.pop(entry["addr"], None)
        else:
            continue
        current: dict[str, int] = {}
        for site, size in live.values():
            current[site] = current.get(site, 0) + size
        totals.append(current)
    fig, ax = plt.subplots(figsize=(11, 6))
    xs = range(len(totals))
    layers = [[t.get(site, 0) / 2**20 for t in totals] for site in sites]
    ax.stackplot(xs, layers, labels=sites, alpha=0.85)
    ax.set_xlabel("allocator event (allocations and completed frees, in order)")
    ax.set_ylabel("MiB held by tensors")
    ax.set_title("Device memory of a model's creation and three training steps, by the line that allocated it")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7.5, ncol=2, frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(image, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run_workload(args.project.resolve(), tmp)
        draw_trace(tmp / "trace.json", args.out / "profiler-trace.png")
        draw_memory(tmp / "snapshot.pickle", args.out / "memory-timeline.png")
    print(f"wrote {args.out / 'profiler-trace.png'} and {args.out / 'memory-timeline.png'}")


if __name__ == "__main__":
    main()

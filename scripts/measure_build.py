"""Measure how long it takes to render, build cold, and rebuild a rendered backend.

    python scripts/measure_build.py [--name foo] [--jobs 2]

Prints: render time (median of 5), cold build with N parallel jobs (both the plain extension build
and the full `pip install --no-build-isolation -e .`), the rebuild after editing one kernel file
(build_ext reuses ninja's objects; pip builds in a fresh directory every time), and the slowest
translation units. These are wall-clock figures on a shared machine: compare them with each other
and with the issue's targets, and run the script twice before trusting a number.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import project


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(cmd: list[str], cwd: Path, jobs: int) -> None:
    env = {**os.environ, "MAX_JOBS": str(jobs), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def compile_cpu_seconds(project_dir: Path) -> dict[str, float]:
    """Per-file compile times from ninja's log of the last build_ext run."""
    logs = list((project_dir / "build").glob("temp*/.ninja_log"))
    times: dict[str, float] = {}
    for line in logs[0].read_text().splitlines()[1:] if logs else []:
        start, end, _, output, _ = line.split("\t")
        times[output.split("/csrc/", 1)[-1]] = (int(end) - int(start)) / 1000
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="foo")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        renders = []
        for i in range(5):
            renders.append(timed(lambda i=i: project.render(tmp / f"r{i}", {"backend_name": args.name})))
        dest = tmp / "project"
        project.render(dest, {"backend_name": args.name})
        python = project.make_env(dest)

        build_ext = [str(python), "setup.py", "build_ext", "--inplace"]
        cold_ext = timed(lambda: run(build_ext, dest, args.jobs))
        cpu = compile_cpu_seconds(dest)
        kernel = dest / "csrc" / "aten" / "Elementwise.cpp"
        kernel.write_text(kernel.read_text() + "\n// edited\n")
        incremental_ext = timed(lambda: run(build_ext, dest, args.jobs))

        shutil.rmtree(dest / "build")
        for so in dest.rglob("*.so"):
            so.unlink()
        pip = [str(python), "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "-e", "."]
        cold_pip = timed(lambda: run(pip, dest, args.jobs))
        kernel.write_text(kernel.read_text() + "// edited again\n")
        incremental_pip = timed(lambda: run(pip, dest, args.jobs))

    rows = [
        ("render (median of 5)", statistics.median(renders)),
        (f"cold build, setup.py build_ext --inplace, {args.jobs} jobs", cold_ext),
        (f"cold build, pip install --no-build-isolation -e ., {args.jobs} jobs", cold_pip),
        ("rebuild after editing csrc/aten/Elementwise.cpp, build_ext", incremental_ext),
        ("rebuild after editing csrc/aten/Elementwise.cpp, pip install -e", incremental_pip),
        ("compiler CPU time summed over translation units (cold build)", sum(cpu.values())),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"backend {args.name!r}, {os.cpu_count()} cores")
    for label, seconds in rows:
        print(f"  {label.ljust(width)}  {seconds:6.1f} s")
    print("slowest translation units (wall seconds while compiling, cold build):")
    for name, seconds in sorted(cpu.items(), key=lambda item: -item[1])[:8]:
        print(f"  {name.ljust(width)}  {seconds:6.1f} s")


if __name__ == "__main__":
    main()

"""Measure how long it takes to render, build cold, and rebuild a rendered backend.

    python scripts/measure_build.py [--name foo] [--jobs 2] [--data KEY=VALUE ...] [--cold-only] [VAR=VALUE ...]

Prints: render time (median of 5), cold build with N parallel jobs (both the plain extension build
and the full `pip install --no-build-isolation -e .`), the rebuild after editing one kernel file (of
the operator library) and one host file (csrc/aten), the slowest translation units, and a reference:
the CPU time of compiling one file that includes only <ATen/ATen.h> with the build's own flags, and
how many such files the cold build's CPU time is worth. `--data` gives other answers
(`--data distributed=false`: what a feature costs); `--cold-only` stops after the cold `build_ext`.
Each build line shows wall-clock time and the CPU time of all the processes it ran (cmake, ninja,
compilers, linker, setup.py): wall time on a shared machine depends on what else runs (check `uptime`), CPU time much
less, and the reference ratio least of all, so compare changes by CPU time or ratio and read wall time
against the targets. ccache is off (a cold build compiles everything). Arguments VAR=VALUE set the
builds' environment, e.g. `PCH=0` (no precompiled header).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
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


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], cwd: Path, jobs: int, settings: dict[str, str]) -> tuple[float, float]:
    """Runs a build; returns (wall seconds, CPU seconds of every process it started)."""
    env = {**os.environ, "MAX_JOBS": str(jobs), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **settings}
    cpu = children_cpu()
    wall = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - wall, children_cpu() - cpu


def compile_seconds(project_dir: Path) -> dict[str, float]:
    """Per-file compile times (wall) from the ninja logs of the last build (CMake's build directory)."""
    times: dict[str, float] = {}
    for log in (project_dir / "build").rglob(".ninja_log"):
        for line in log.read_text().splitlines()[1:]:
            start, end, _, output, _ = line.split("\t")
            # csrc/<layer>/CMakeFiles/<target>.dir/<file>.o, or (the unity build) .../Unity/unity_0_cxx.cxx.o
            name = re.sub(r"CMakeFiles/[^/]+\.dir/", "", output)
            times[name] = (int(end) - int(start)) / 1000
    return times


def aten_reference(project_dir: Path) -> float:
    """CPU seconds of compiling a file that includes only <ATen/ATen.h>, with the compiler and flags
    of the project's cold build (those of csrc/core, from the compile_commands.json CMake wrote)."""
    commands = json.loads(next((project_dir / "build").rglob("compile_commands.json")).read_text())
    entry = next(entry for entry in commands if "/csrc/core/" in entry["file"])
    source = project_dir / "build" / "aten_reference.cpp"
    source.write_text("#include <ATen/ATen.h>\n")
    # The unit's source and its object (-o ...: CMake 3.25 writes no "output" field) become the reference's.
    command = re.sub(r"-o \S+", f"-o {source.with_suffix('.o')}", entry["command"].replace(entry["file"], str(source)))
    command = command.replace("/usr/lib/ccache/", "")
    cpu = children_cpu()
    env = {**os.environ, "CCACHE_DISABLE": "1"}
    subprocess.run(command, shell=True, cwd=entry["directory"], env=env, check=True, stdout=subprocess.DEVNULL)
    return children_cpu() - cpu


def incremental_and_pip(dest: Path, python: Path, build_ext: list[str], args, settings: dict[str, str]):
    """The rebuilds after editing one kernel file and one host file, then a cold and an incremental
    pip install."""
    kernel = dest / "csrc" / "kernels" / "emulated" / "elementwise.cpp"
    kernel.write_text(kernel.read_text() + "\n// edited\n")
    incremental_kernel = run(build_ext, dest, args.jobs, settings)
    host = dest / "csrc" / "aten" / "Elementwise.cpp"
    host.write_text(host.read_text() + "\n// edited\n")
    incremental_host = run(build_ext, dest, args.jobs, settings)
    shutil.rmtree(dest / "build")
    for so in dest.rglob("*.so"):
        so.unlink()
    pip = [str(python), "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "-e", "."]
    cold_pip = run(pip, dest, args.jobs, settings)
    host.write_text(host.read_text() + "// edited again\n")
    incremental_pip = run(pip, dest, args.jobs, settings)
    return incremental_kernel, incremental_host, cold_pip, incremental_pip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="foo")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--data", action="append", default=[], metavar="KEY=VALUE", help="another answer")
    parser.add_argument("--cold-only", action="store_true", help="only the cold build_ext")
    parser.add_argument("settings", nargs="*", metavar="VAR=VALUE", help="environment for the builds")
    args = parser.parse_args()
    settings = dict(item.split("=", 1) for item in args.settings)
    answers = {"backend_name": args.name, **project.parse_data(args.data)}

    settings = {"CCACHE_DISABLE": "1", **settings}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        renders = []
        for i in range(5):
            renders.append(timed(lambda i=i: project.render(tmp / f"r{i}", answers)))
        dest = tmp / "project"
        project.render(dest, answers)
        python = project.make_env(dest)

        build_ext = [str(python), "setup.py", "build_ext", "--inplace"]
        cold_ext = run(build_ext, dest, args.jobs, settings)
        per_tu = compile_seconds(dest)
        reference = aten_reference(dest)
        if args.cold_only:
            incremental_kernel = incremental_host = cold_pip = incremental_pip = None
        else:
            incremental_kernel, incremental_host, cold_pip, incremental_pip = incremental_and_pip(
                dest, python, build_ext, args, settings
            )

    rows = [
        (f"cold build, setup.py build_ext --inplace, {args.jobs} jobs", cold_ext),
        (f"cold build, pip install --no-build-isolation -e ., {args.jobs} jobs", cold_pip),
        ("rebuild after editing csrc/kernels/emulated/elementwise.cpp, build_ext", incremental_kernel),
        ("rebuild after editing csrc/aten/Elementwise.cpp, build_ext", incremental_host),
        ("rebuild after editing csrc/aten/Elementwise.cpp, pip install -e", incremental_pip),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"answers {answers}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"  {'render (median of 5)'.ljust(width)}  {statistics.median(renders):6.1f} s")
    print(f"  {''.ljust(width)}  {'wall':>6}   {'CPU':>6}")
    for label, measured in rows:
        if measured is not None:
            wall, cpu = measured
            print(f"  {label.ljust(width)}  {wall:6.1f} s {cpu:6.1f} s")
    print(f"  {'one file with only <ATen/ATen.h>, same flags (reference)'.ljust(width)}  {'':6}   {reference:6.1f} s")
    print(f"  {'cold build_ext CPU / reference CPU'.ljust(width)}  {cold_ext[1] / reference:6.1f} x")
    label = "compile wall seconds summed over translation units (ninja log)"
    print(f"  {label.ljust(width)}  {sum(per_tu.values()):6.1f} s")
    print("slowest translation units (wall seconds while compiling, cold build):")
    for name, seconds in sorted(per_tu.items(), key=lambda item: -item[1])[:8]:
        print(f"  {name.ljust(width)}  {seconds:6.1f} s")


if __name__ == "__main__":
    main()

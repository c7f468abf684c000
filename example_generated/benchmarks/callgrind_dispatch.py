"""Host instructions per call of small operators on foo and on the CPU, counted by callgrind.

    python benchmarks/callgrind_dispatch.py [--ops add,mul_scalar,add_,sin] [--short 1000] [--long 5000]

Timing a microsecond operator on a shared machine is noisy; counting the instructions the calling
thread executes is not. One Python process runs, under `valgrind --tool=callgrind`, a loop of
`short` and a loop of `long` iterations of each operator on the CPU and on the device, and callgrind
writes the instructions of each loop apart (a dump at each call of getppid(), which the script
makes between the loops). The difference between the two loops divided by `long - short` is the
cost of one iteration, Python's loop included, as the CPU column shows; what happens once per loop
cancels out. Only the calling thread counts (--separate-threads): the stream workers run the
kernels, as a device would. Needs valgrind (apt install valgrind); one run takes a minute or two,
as everything runs about 50 times slower under it.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEVICE = "foo"

# name: (a label for the table, the statement the loop runs on tensors x and y of 4 elements)
OPS = {
    "add": ("x + y (native)", "x + y"),
    "mul_scalar": ("x * 2.5 (native)", "x * 2.5"),
    "add_": ("x.add_(y) (native)", "x.add_(y)"),
    "sin": ("torch.sin(x) (CPU fallback)", "torch.sin(x)"),
}

# Runs under callgrind: for each device and operator, a warm-up, then the short and the long loop,
# each followed by os.getppid(), at which callgrind dumps what the process ran since the last dump.
CHILD = """
import os, sys, torch
import torch_foo  # noqa: F401
short, long = int(sys.argv[1]), int(sys.argv[2])
for device in sys.argv[3].split(","):
    x = torch.randn(4).to(device)
    y = torch.randn(4).to(device)
    for statement in sys.argv[4:]:
        loop = compile(f"for _ in range(n): {statement}", statement, "exec")
        exec(loop, {"torch": torch, "x": x, "y": y, "n": 200})
        torch.accelerator.synchronize() if device != "cpu" else None
        os.getppid()
        for n in (short, long):
            exec(loop, {"torch": torch, "x": x, "y": y, "n": n})
            os.getppid()
    torch.accelerator.synchronize() if device != "cpu" else None
"""


def main_thread_parts(out_dir: Path) -> list[int]:
    """Instructions of the main thread in each dump, in order. Callgrind names the files
    <out>.<part>-<thread>, the main thread's -01."""
    parts = {}
    for path in out_dir.glob("callgrind.out.*-01"):
        match = re.fullmatch(r"callgrind\.out\.(\d+)-01", path.name)
        if not match:
            continue
        total = re.search(r"^(?:summary|totals):\s+(\d+)", path.read_text(), re.MULTILINE)
        if total is None:
            raise SystemExit(f"no instruction total in {path}")
        parts[int(match.group(1))] = int(total.group(1))
    return [parts[part] for part in sorted(parts)]


def run(devices: list[str], statements: list[str], short: int, long: int) -> list[int]:
    """The dumps of the main thread: per device and statement, warm-up, short loop, long loop."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--separate-threads=yes",
            "--dump-before=getppid",
            f"--callgrind-out-file={Path(tmp) / 'callgrind.out'}",
            sys.executable,
            "-c",
            CHILD,
            str(short),
            str(long),
            ",".join(devices),
            *statements,
        ]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise SystemExit(f"valgrind failed:\n{result.stderr[-3000:]}")
        parts = main_thread_parts(Path(tmp))
    # Three dumps per device and statement (up to the end of the warm-up, the short loop, the long
    # loop), and the rest at exit.
    expected = 3 * len(devices) * len(statements)
    if len(parts) < expected:
        raise SystemExit(f"callgrind wrote {len(parts)} dumps of the main thread, expected at least {expected}")
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default="add,sin", help=f"comma-separated, of: {', '.join(OPS)}")
    parser.add_argument("--short", type=int, default=1000, help="iterations of the short loop")
    parser.add_argument("--long", type=int, default=5000, help="iterations of the long loop")
    args = parser.parse_args()
    names = [name.strip() for name in args.ops.split(",") if name.strip()]
    unknown = [name for name in names if name not in OPS]
    if unknown or not names:
        parser.error(f"unknown operators {', '.join(unknown)} (known: {', '.join(OPS)})")
    if not 0 < args.short < args.long:
        parser.error("need 0 < --short < --long")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt install valgrind)")
    devices = ["cpu", DEVICE]
    parts = run(devices, [OPS[name][1] for name in names], args.short, args.long)
    per_call = {}
    index = 0  # parts[0]: start-up and the first warm-up
    for device in devices:
        for name in names:
            short, long = parts[index + 1], parts[index + 2]  # parts[index]: up to the warm-up's end
            per_call[device, name] = (long - short) / (args.long - args.short)
            index += 3
    print(f"Instructions per call on the calling thread (callgrind, {args.long} minus {args.short} iterations)")
    print(f"  {'4 elements':30} {'cpu':>8} {DEVICE:>8} {'ratio':>6}")
    for name in names:
        cpu, device = per_call["cpu", name], per_call[DEVICE, name]
        print(f"  {OPS[name][0]:30} {cpu:8,.0f} {device:8,.0f} {device / cpu:5.2f}x")


if __name__ == "__main__":
    main()

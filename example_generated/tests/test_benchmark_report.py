"""The benchmark report (benchmarks/report.py): runs every benchmark briefly and writes a Markdown
report whose plots exist. Timings are never asserted, only that the report is complete."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_report_writes_every_section_and_its_plots(tmp_path):
    command = [sys.executable, "-m", "benchmarks.report", "--quick", "--output", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    report = (tmp_path / "report.md").read_text()
    for title in (
        "Dispatch overhead per operator class",
        "Copy bandwidth",
        "Allocator cost",
        "Training steps",
        "Compiled against eager",
        "Profiler cost",
    ):
        assert f"## {title}" in report
    images = re.findall(r"!\[[^]]*\]\(([^)]+)\)", report)
    assert {"dispatch.png", "bandwidth.png", "allocator.png", "training.png", "profiler.png"} <= set(images)
    for image in images:
        assert (tmp_path / image).read_bytes().startswith(b"\x89PNG")
    for direction in ("host to device", "device to host", "device to device"):
        assert direction in report

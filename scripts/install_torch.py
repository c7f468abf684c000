"""Installs a torch release into this interpreter's environment, the CPU build where possible.

On Linux the package index's plain ``torch==X`` is the CUDA build (several GB of CUDA libraries, which
work without a GPU); PyTorch's CPU index has the CPU build. With no index given, this tries the CPU
index and falls back to the package index where the CPU index is not reachable (as on machines that
reach only the package index), and says which it used.

    python scripts/install_torch.py torch==2.14.1 [--index-url URL]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import urllib.error
import urllib.request

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def reachable(url: str, timeout: float = 5.0) -> str | None:
    """None if `url` answers, else why not."""
    try:
        with urllib.request.urlopen(f"{url}/torch/", timeout=timeout):
            return None
    except (urllib.error.URLError, OSError) as error:
        return str(getattr(error, "reason", error))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="the requirement, such as torch==2.14.1")
    parser.add_argument("--index-url", default="", help="install from this index only (no fallback)")
    args = parser.parse_args()
    pip = [sys.executable, "-m", "pip", "install", "--quiet", args.spec]
    if args.index_url:
        print(f"install_torch: {args.spec} from {args.index_url}", flush=True)
        return subprocess.run([*pip, "--index-url", args.index_url]).returncode
    problem = reachable(CPU_INDEX)
    if problem is None:
        print(f"install_torch: {args.spec} from PyTorch's CPU index ({CPU_INDEX})", flush=True)
        return subprocess.run([*pip, "--index-url", CPU_INDEX]).returncode
    print(
        f"install_torch: PyTorch's CPU index is not reachable ({problem}): {args.spec} from the package index "
        "(on Linux its torch is the CUDA build, a few GB, which runs without a GPU)",
        flush=True,
    )
    return subprocess.run(pip).returncode


if __name__ == "__main__":
    sys.exit(main())

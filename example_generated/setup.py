"""Builds the foo backend's C++ extension (torch_foo._C) with torch's cpp_extension and ninja.

Build against the torch you run, without build isolation:

    pip install --no-build-isolation -e .

Environment: DEBUG=1 builds with -O0 -g; MAX_JOBS=N limits parallel compile jobs.
"""

import os

# Building imports torch; never let torch autoload a previous (maybe stale) build of this backend.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

from pathlib import Path  # noqa: E402

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

ROOT = Path(__file__).resolve().parent
SOURCES = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "csrc").rglob("*.cpp"))
DEBUG = os.environ.get("DEBUG", "0") not in ("", "0")
# -fopenmp: at::parallel_for (used by kernels and large copies) is a header template that runs
# serially unless OpenMP is on; the extension then shares the libgomp that torch loads.
CXX_FLAGS = ["-fopenmp", *(["-O0", "-g"] if DEBUG else ["-O3", "-g0"])]

setup(
    ext_modules=[
        CppExtension(
            name="torch_foo._C",
            sources=SOURCES,
            extra_compile_args={"cxx": CXX_FLAGS},
            extra_link_args=["-fopenmp"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)

"""How the foo backend's C++ is built: one place for the source groups, the compiler flags and
where the libraries land, read by setup.py and by the tests that compile C++ themselves
(tests/test_runtime.py builds the driver's conformance test against the same runtime library).

Three parts, built in one ninja run:
  csrc/runtime/   the driver (runtime.h), a static library: its entry points and the emulated device
  csrc/kernels/   the operator library (kernels.h), a static library: the emulated device's kernels
  csrc/core, csrc/aten, csrc/distributed, csrc/python   the PyTorch extension torch_foo._C, linked with both
A port to hardware points RUNTIME_DIRS and KERNEL_DIRS at its own implementation directories.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent

# Directories whose .cpp files form each part (not recursive: a port adds its own directory).
RUNTIME_DIRS = ("csrc/runtime", "csrc/runtime/emulated")
KERNEL_DIRS = ("csrc/kernels/emulated",)
EXTENSION_DIRS = ("csrc/core", "csrc/aten", "csrc/distributed", "csrc/python")

RUNTIME_LIBRARY = "foo_runtime"
KERNELS_LIBRARY = "foo_kernels"

# The C++ standard of the whole build: torch 2.13's headers need C++20.
CXX_STANDARD = "-std=c++20"

# What the driver and the operator library need from outside the project: headers, library
# directories and libraries, linked into the extension and the conformance test alike. The emulation
# needs only dlopen (fooModuleLoad); a port adds its vendor's driver and operator libraries here
# (and an rpath in link_flags() if they are not on the loader's path).
INCLUDE_DIRS: list[str] = []
LIBRARY_DIRS: list[str] = []
LIBRARIES = ["dl"]

# Files that register kernels and do host-side bookkeeping but loop over no elements. Most of their
# compile time is optimising inline code from torch's headers: -O1 compiles them about 20% faster and
# the benchmarks do not notice (Profiler.cpp: 21 s of CPU at -O3, 15 s at -O1; it runs while a
# profile is recorded or processed, never per operator). Kernel loops and the rest of csrc/core keep -O3.
LIGHT_SOURCES = {"csrc/python/Module.cpp", "csrc/core/Profiler.cpp"} | {
    f"csrc/aten/{name}.cpp"
    for name in (
        "Attention",
        "Autocast",
        "BackendMetaCopies",
        "Fallback",
        "RecordStream",
        "Resize",
        "ShallowCopy",
        "Sparse",
        "Views",
        "WiderDtypeOps",
        "WiderDtypes",
    )
}
# The c10d backend's files that include all of ATen (bookkeeping per collective, no element loops).
LIGHT_SOURCES |= {"csrc/distributed/Backend.cpp", "csrc/distributed/GlooTransport.cpp"}


def extension_include_dirs() -> list[str]:
    """Headers only the PyTorch extension needs beyond torch's: Kineto's (the profiler's device
    interface, used by csrc/core/Profiler.cpp), which include each other by file name. The torch
    wheel ships them in its include/kineto directory."""
    from torch.utils.cpp_extension import include_paths

    return [str(Path(include_paths()[0]) / "kineto")]


# The precompiled header every file of the extension, and the emulated math library, starts from
# (the torch-free files of the driver and the operator library do not need it). PCH=0 builds
# without it, file by file as each source includes what it uses.
PRECOMPILED_HEADER = "csrc/precompiled.h"
PRECOMPILED_USERS = ("csrc/kernels/emulated/host_math.cpp",)


def use_precompiled_header() -> bool:
    return os.environ.get("PCH", "1") not in ("", "0")


def starts_from_precompiled_header(source: str) -> bool:
    """Whether `source` (relative to the root) is compiled with the precompiled header."""
    return source in PRECOMPILED_USERS or any(source.startswith(d + "/") for d in EXTENSION_DIRS)


def debug() -> bool:
    """DEBUG=1 builds with -O0 -g."""
    return os.environ.get("DEBUG", "0") not in ("", "0")


def sources(dirs: tuple[str, ...]) -> list[str]:
    """The .cpp files of `dirs`, relative to the project root, sorted."""
    found = (path for directory in dirs for path in (ROOT / directory).glob("*.cpp"))
    return sorted(str(path.relative_to(ROOT)) for path in found)


def cxx_flags() -> list[str]:
    """Flags of every C++ file of the build. -fopenmp: the emulated device runs a kernel's blocks on
    an OpenMP team, and ATen's at::parallel_for (large copies) is serial without it; the extension
    then shares the libgomp that torch loads."""
    return ["-fopenmp", *(["-O0", "-g"] if debug() else ["-O3", "-g0"])]


def light_flags() -> list[str]:
    """Appended for LIGHT_SOURCES."""
    return [] if debug() else ["-O1"]


def link_flags() -> list[str]:
    return ["-fopenmp"]


def build_dir() -> Path:
    """Where the objects and the two static libraries go, for every way of building (setup.py
    build_ext, pip install -e): a fixed directory, so that rebuilds recompile only what changed."""
    return ROOT / "build" / f"temp.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"


def library_path(name: str) -> Path:
    return build_dir() / f"lib{name}.a"

"""How the foo backend's C++ is built: one place for the source groups, the compiler flags and
where the libraries land, read by setup.py and by the tests that compile C++ themselves
(tests/test_runtime.py builds the driver's conformance test against the same runtime library).

Three parts, built in one ninja run:
  csrc/runtime/   the driver (runtime.h), a static library: its entry points and the emulated device
  csrc/kernels/   the operator library (kernels.h), a static library: the emulated device's kernels
  csrc/core, csrc/aten, csrc/families, csrc/compile, csrc/profiler, csrc/custom_ops, csrc/distributed, csrc/python
                  the PyTorch extension torch_foo._C, linked with both
A port to hardware points RUNTIME_DIRS and KERNEL_DIRS at its own implementation directories.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent

# Directories whose .cpp files form each part (not recursive: a port adds its own directory).
RUNTIME_DIRS = ("csrc/runtime", "csrc/runtime/emulated")
KERNEL_DIRS = ("csrc/kernels/emulated",)
EXTENSION_DIRS = (
    "csrc/core",
    "csrc/aten",
    "csrc/families",
    "csrc/compile",
    "csrc/profiler",
    "csrc/custom_ops",
    "csrc/distributed",
    "csrc/python",
)

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

# Optimisation levels. The element loops live in the operator library (csrc/kernels) and the driver
# (csrc/runtime): those compile at -O3. The extension's files (csrc/core, csrc/aten, ...) check
# arguments, describe tensors to the library and keep books; most of their compile time is
# optimising inline code from torch's headers. The hot ones, on every operator's path, compile at
# -O1; LIGHT_SOURCES (registration, and code off the per-operator path) at -Og. Measured with
# benchmarks/callgrind_dispatch.py: -O1 instead of -O3 adds 1 to 2% instructions to a small native
# operator and saves a third of the hot files' compile time; -Og saves another sixth of the light
# files' but adds 5% to the CPU fallback and 2% to the native matmul, sums and softmax, which is why
# those files are not light. docs/build-speed.md has the numbers.
LIGHT_SOURCES = {
    "csrc/python/Module.cpp",
    "csrc/python/AutogradThreads.cpp",
    "csrc/families/Sparse.cpp",
} | {
    f"csrc/aten/{name}.cpp"
    for name in ("Autocast", "BackendMetaCopies", "FallbackRouting", "RecordStream", "Resize", "ShallowCopy", "Views")
}
LIGHT_SOURCES |= {"csrc/profiler/KinetoSession.cpp", "csrc/profiler/LegacyProfiler.cpp"}
LIGHT_SOURCES |= {f"csrc/families/{name}.cpp" for name in ("Attention", "WiderDtypeOps", "WiderDtypes")}
# The c10d backend's files that include all of ATen (bookkeeping per collective, no element loops).
LIGHT_SOURCES |= {"csrc/distributed/Backend.cpp", "csrc/distributed/GlooTransport.cpp"}


def extension_include_dirs() -> list[str]:
    """Headers only the PyTorch extension needs beyond torch's: Kineto's (the profiler's device
    interface, used by csrc/profiler/KinetoSession.cpp), which include each other by file name. The torch
    wheel ships them in its include/kineto directory."""
    from torch.utils.cpp_extension import include_paths

    return [str(Path(include_paths()[0]) / "kineto")]


# The precompiled header every file of the extension, and the emulated math library, starts from
# (the torch-free files of the driver and the operator library do not need it), in the per-file
# build (UNITY=0): PCH=0 builds without it, each source including what it uses. The unity build
# parses those headers once per group anyway, and a header built before any group can start
# would cost more than it saves: PCH=1 turns it on there (the template repository's
# docs/build-speed.md has the measurements).
PRECOMPILED_HEADER = "csrc/precompiled.h"
PRECOMPILED_USERS = ("csrc/kernels/emulated/host_math.cpp",)


def use_precompiled_header() -> bool:
    return os.environ.get("PCH", "0" if unity() else "1") not in ("", "0")


def in_extension(source: str) -> bool:
    """Whether `source` (relative to the root) is one of the extension's files (EXTENSION_DIRS)."""
    return any(source.startswith(d + "/") for d in EXTENSION_DIRS)


def starts_from_precompiled_header(source: str) -> bool:
    """Whether `source` (relative to the root) is compiled with the precompiled header."""
    return source in PRECOMPILED_USERS or in_extension(source)


# The unity build (UNITY=1, the default): the extension's sources compile as two translation units
# that setup.py writes into the build directory, each #including a group of them, so that torch's
# headers are parsed once per group instead of once per file. The sources stay one file per
# integration point. A group holds the files of one optimisation level (LIGHT_SOURCES at -Og, the
# hot ones at -O1; a translation unit has one set of flags). The light group includes all of ATen
# anyway (c10d, pybind11, autocast, Kineto), so the light files that need only per-operator headers
# add nothing but their own code to it; the hot group parses the narrower headers of the operator
# files and csrc/core once. The driver (csrc/runtime: small files, each mostly the standard
# library's headers) is one more unit; the operator library (csrc/kernels) stays per file, so that
# editing a kernel recompiles that kernel alone. Editing one file of a group recompiles the group:
# UNITY=0 compiles file by file, for fast rebuilds while developing.
UNITY_MACROS_PATTERN = re.compile(r"^#define\s+(\w+)", re.MULTILINE)
COMPAT_FIRST_INCLUDE = re.compile(r'#include "(\.\./compat/\w+\.h)"')


def unity() -> bool:
    return os.environ.get("UNITY", "1") not in ("", "0")


def configuration_macros(source: str) -> list[str]:
    """The macros `source` defines before its first #include: they configure the headers for that
    file alone (TORCH_ASSERT_ONLY_METHOD_OPERATORS, AT_PER_OPERATOR_HEADERS, USE_KINETO), so a unity
    group #undefs them after it."""
    text = (ROOT / source).read_text()
    first_include = text.find("\n#include")
    macros = UNITY_MACROS_PATTERN.findall(text[: first_include if first_include >= 0 else len(text)])
    # A compat header included first configures the headers after it for the file (csrc/compat/Kineto.h:
    # USE_KINETO): its macros count as the file's.
    first = COMPAT_FIRST_INCLUDE.match(text, first_include + 1) if first_include >= 0 else None
    if first:
        header = ((ROOT / source).parent / first.group(1)).read_text()
        macros += UNITY_MACROS_PATTERN.findall(header.split("\n#include", 1)[0])
    return macros


def unity_groups(extension_sources: list[str], runtime_sources: list[str]) -> dict[str, list[str]]:
    """The unity build's groups, by name, longest to compile first (setup.py passes them to ninja in
    this order, and ninja starts the ready jobs in the order of its build file, so the longest group
    starts at once and the other job compiles the rest meanwhile): the light files of
    `extension_sources`, the hot ones, then `runtime_sources` (all relative to the root). In a
    group, the files that configure torch's headers with something other than the per-operator macros
    (KinetoSession.cpp's USE_KINETO) come first, before another file includes those headers without it."""
    plain = {"TORCH_ASSERT_ONLY_METHOD_OPERATORS", "AT_PER_OPERATOR_HEADERS"}
    groups = {
        "light": [source for source in extension_sources if source in LIGHT_SOURCES],
        "hot": [source for source in extension_sources if source not in LIGHT_SOURCES],
        "runtime": list(runtime_sources),
    }
    return {
        name: sorted(group, key=lambda source: (not set(configuration_macros(source)) - plain, source))
        for name, group in groups.items()
        if group
    }


def unity_source(group: list[str]) -> str:
    """The text of the translation unit that compiles `group`: each file by its absolute path (its
    own #include "..." then finds its neighbours; ninja's dependency file lists it, so editing it
    recompiles the group), its configuration macros undefined after it."""
    lines = ["// Written by setup.py (the unity build, build_config.py): edit the sources, not this file."]
    for source in group:
        lines.append(f'#include "{(ROOT / source).as_posix()}"')
        lines += [f"#undef {macro}" for macro in configuration_macros(source)]
    return "\n".join(lines) + "\n"


# Sanitizers a build may instrument every part with (SANITIZE=address,undefined or SANITIZE=thread):
# gcc's runtimes, which ship with gcc. ThreadSanitizer cannot be combined with the other two.
SANITIZERS = ("address", "undefined", "thread")
# Suppression files for reports about code that is not ours (the interpreter, torch), each entry
# explained there.
SUPPRESSIONS = ROOT / "tests" / "sanitizers"


def debug() -> bool:
    """DEBUG=1 builds with -O0 -g."""
    return os.environ.get("DEBUG", "0") not in ("", "0")


def sanitizers() -> list[str]:
    """The sanitizers of SANITIZE (comma-separated names of SANITIZERS), checked."""
    names = [name.strip() for name in os.environ.get("SANITIZE", "").split(",") if name.strip()]
    unknown = [name for name in names if name not in SANITIZERS]
    if unknown:
        raise SystemExit(f"SANITIZE: unknown sanitizer {', '.join(unknown)} (known: {', '.join(SANITIZERS)})")
    if "thread" in names and len(names) > 1:
        raise SystemExit("SANITIZE: thread cannot be combined with other sanitizers")
    return names


def sanitizer_flags() -> list[str]:
    """Compile and link flags of a sanitized build: -O1 keeps the reports' stack traces close to
    the source (frame pointers, no inlining across most calls) at a fraction of -O0's slowdown."""
    names = sanitizers()
    if not names:
        return []
    return [f"-fsanitize={','.join(names)}", "-fno-omit-frame-pointer", "-g"]


def sources(dirs: tuple[str, ...]) -> list[str]:
    """The .cpp files of `dirs`, relative to the project root, sorted."""
    found = (path for directory in dirs for path in (ROOT / directory).glob("*.cpp"))
    return sorted(str(path.relative_to(ROOT)) for path in found)


def cxx_flags() -> list[str]:
    """Flags of every C++ file of the build. -fopenmp: the emulated device runs a kernel's blocks on
    an OpenMP team, and ATen's at::parallel_for (large copies) is serial without it; the extension
    then shares the libgomp that torch loads."""
    if debug():
        optimisation = ["-O0", "-g"]
    elif sanitizers():
        optimisation = ["-O1"]
    else:
        optimisation = ["-O3", "-g0"]
    return ["-fopenmp", *optimisation, *sanitizer_flags()]


def optimisation_flags(source: str) -> list[str]:
    """Appended to cxx_flags() for `source` (relative to the root): -Og for LIGHT_SOURCES, -O1 for the
    extension's other files, nothing (-O3) for the operator library and the driver."""
    if debug() or sanitizers() or not in_extension(source):
        return []
    return ["-Og"] if source in LIGHT_SOURCES else ["-O1"]


def link_flags() -> list[str]:
    return ["-fopenmp", *sanitizer_flags()]


def build_dir() -> Path:
    """Where the objects and the two static libraries go, for every way of building (setup.py
    build_ext, pip install -e): a fixed directory, so that rebuilds recompile only what changed. A
    sanitized build has its own, so that switching between builds recompiles nothing."""
    suffix = "".join(f"-{name}" for name in sanitizers())
    return ROOT / "build" / f"temp.{sysconfig.get_platform()}-{sys.implementation.cache_tag}{suffix}"


def library_path(name: str) -> Path:
    return build_dir() / f"lib{name}.a"


def compiler() -> list[str]:
    """The C++ compiler of the build: torch's cpp_extension runs $CXX, else c++."""
    return shlex.split(os.environ.get("CXX") or "c++")


def sanitizer_runtime() -> str | None:
    """The sanitizer runtime an uninstrumented program (the Python interpreter) must load first,
    with LD_PRELOAD: ASan and TSan replace malloc and the thread functions and refuse to start
    later. UBSan alone needs none (the extension loads its runtime)."""
    names = sanitizers()
    library = "libtsan.so" if "thread" in names else "libasan.so" if "address" in names else None
    if library is None:
        return None
    command = [*compiler(), f"-print-file-name={library}"]
    path = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    if not os.path.isabs(path):
        raise SystemExit(f"{' '.join(command)} found no {library}: install the compiler's sanitizer runtime")
    return os.path.realpath(path)


def compiler_without_sanitizer() -> Path:
    """A script that runs the compiler without LD_PRELOAD, named like it: CXX for the compilers the
    tests start (Inductor's C++ kernels, torch.utils.cpp_extension, tests/test_runtime.py). The
    compiler is not instrumented; with the sanitizer runtime preloaded, the leak check at its exit
    reports the compiler's own allocations and fails the build (Inductor: "No working C++ compiler
    found"). It wraps $CXX, else g++, Inductor's default; the name keeps Inductor's gcc detection."""
    real = os.environ.get("CXX") or "g++"
    path = build_dir() / "compiler-without-sanitizer" / Path(shlex.split(real)[0]).name
    if Path(real) == path:
        return path  # already the wrapper (a sanitized process that sets up the environment again)
    text = f'#!/bin/sh\nunset LD_PRELOAD\nexec {real} "$@"\n'
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    return path


def sanitizer_environment() -> dict[str, str]:
    """The environment that runs Python (pytest) with the build's sanitizers: the preloaded runtime
    and each sanitizer's options. Reports fail the run: ASan and TSan stop at the first one (exit code
    66 for TSan), UBSan too (halt_on_error); leak detection runs at exit."""
    names = sanitizers()
    env = {}
    if runtime := sanitizer_runtime():
        # With the C++ runtime right after it: the interpreter does not link libstdc++, so when the
        # sanitizer starts it finds no __cxa_throw to intercept, and the first C++ exception (any
        # error raised to Python) ends the process in a failed ASan CHECK instead.
        command = [*compiler(), "-print-file-name=libstdc++.so.6"]
        cxx = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
        env["LD_PRELOAD"] = f"{runtime} {os.path.realpath(cxx)}" if os.path.isabs(cxx) else runtime
        env["CXX"] = str(compiler_without_sanitizer())
    if "address" in names:
        env["ASAN_OPTIONS"] = ":".join(
            [
                "detect_leaks=1",
                # A CPU tensor too large for the host raises torch's out-of-memory error, as
                # without ASan, instead of ending the process.
                "allocator_may_return_null=1",
                # Dynamic TLS (the thread_local variables of every library loaded with dlopen, torch's
                # and this extension's, one block per thread and library) is not tracked with ranges
                # of its own. gcc 12's runtime records each new block's range from a guess: a block
                # that malloc returned 16 bytes past a page boundary is taken for one with glibc
                # 2.19's header, and the 16 bytes before it (ASan's own chunk header) are read as the
                # block's start and size. The leak check at exit then scans that nonsense range and
                # dies ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal error"),
                # in any process whose live threads happen to own such a block (found in the
                # benchmark report's run; tests/test_exit.py's many_threads case makes them). The
                # blocks are ordinary heap blocks, reached through each thread's DTV, which the leak
                # check scans like the rest of the heap: without the guess it reports no fewer leaks.
                "intercept_tls_get_addr=0",
            ]
        )
        env["LSAN_OPTIONS"] = f"suppressions={SUPPRESSIONS / 'lsan.supp'}:print_suppressions=0"
        # Python objects from malloc, not from pymalloc's arenas: LeakSanitizer scans the heap for
        # pointers but not those mmap'd arenas, so everything only Python objects point to (pybind11's
        # function records, torch's registrations: thousands of allocations) would look leaked.
        env["PYTHONMALLOC"] = "malloc"
    if "undefined" in names:
        env["UBSAN_OPTIONS"] = f"print_stacktrace=1:halt_on_error=1:suppressions={SUPPRESSIONS / 'ubsan.supp'}"
    if "thread" in names:
        env["TSAN_OPTIONS"] = f"halt_on_error=1:exitcode=66:suppressions={SUPPRESSIONS / 'tsan.supp'}"
        # One OpenMP thread: libgomp (torch's and the kernels') is not instrumented, so TSan does not
        # see its barriers order a parallel region's threads and would report their hand-offs as
        # races. The threads TSan checks here are the program's, the stream workers and the runtime's.
        env["OMP_NUM_THREADS"] = "1"
    return env


def build_and_test(pytest_args: list[str]) -> int:
    """Builds the extension with SANITIZE's sanitizers (pip install --no-build-isolation -e ., into
    the build directory of that build) and runs pytest with `pytest_args` under them; returns pytest's
    exit code. The in-tree extension is then the sanitized one: a plain `pip install
    --no-build-isolation -e .` (which relinks from its own build directory) makes it the plain one again."""
    if not sanitizers():
        raise SystemExit("SANITIZE is not set: SANITIZE=address,undefined or SANITIZE=thread")
    build = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "-e", str(ROOT)]
    subprocess.run(build, check=True, env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    test = [sys.executable, "-m", "pytest", *pytest_args]
    return subprocess.run(test, cwd=ROOT, env={**os.environ, **sanitizer_environment()}).returncode


def crash_environment() -> dict[str, str]:
    """Variables for a child that crashes on purpose with SIGSEGV (strict memory mode's tests): the
    sanitizers' own SIGSEGV handler would report the crash first and exit with 1; without it, the
    runtime's handler explains the crash and the signal ends the process, as in a plain build."""
    names = {"address": "ASAN_OPTIONS", "thread": "TSAN_OPTIONS"}
    return {names[n]: f"{os.environ.get(names[n], '')}:handle_segv=0" for n in sanitizers() if n in names}


if __name__ == "__main__":
    # python build_config.py sanitizer-env        prints NAME=value lines (for $GITHUB_ENV, or
    #                                             `export $(python build_config.py sanitizer-env)`)
    # python build_config.py sanitized CMD ...    runs CMD with that environment
    # python build_config.py test [PYTEST ARGS]   builds with the sanitizers and runs pytest under them
    # All read SANITIZE, as the build does.
    if sys.argv[1:2] == ["sanitizer-env"]:
        print("\n".join(f"{name}={value}" for name, value in sanitizer_environment().items()))
    elif sys.argv[1:2] == ["sanitized"] and len(sys.argv) > 2:
        os.execvpe(sys.argv[2], sys.argv[2:], {**os.environ, **sanitizer_environment()})
    elif sys.argv[1:2] == ["test"]:
        sys.exit(build_and_test(sys.argv[2:]))
    else:
        usage = "python build_config.py sanitizer-env | sanitized COMMAND [ARGS...] | test [PYTEST ARGS...]"
        raise SystemExit(f"{__doc__}\nusage: {usage}")

"""The sanitizer harness of the tests: the environment that runs Python (pytest) with a sanitized
build of the extension, and a command that builds and tests under it. The build side is a CMake
option (SANITIZE, which setup.py passes on: every target, the driver's conformance tests too, is
instrumented); this module is the run side, read by the tests (conftest.py, test_runtime.py,
test_strict_memory.py, test_fallback_sweep.py) and the CI workflow.

    python tests/sanitizers/harness.py sanitizer-env       prints NAME=value lines (for $GITHUB_ENV, or
                                                           `export $(python tests/sanitizers/harness.py sanitizer-env)`)
    python tests/sanitizers/harness.py sanitized CMD ...   runs CMD with that environment
    python tests/sanitizers/harness.py test [PYTEST ARGS]  builds with the sanitizers and runs pytest under them

All read SANITIZE (address,undefined or thread), as the build does.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Sanitizers a build may instrument every part with: gcc's runtimes, which ship with gcc.
# ThreadSanitizer cannot be combined with the other two (CMakeLists.txt checks it too).
SANITIZERS = ("address", "undefined", "thread")
# Suppression files for reports about code that is not ours (the interpreter, torch), each entry
# explained there.
SUPPRESSIONS = Path(__file__).resolve().parent


def sanitizers() -> list[str]:
    """The sanitizers of SANITIZE (comma-separated names of SANITIZERS), checked."""
    names = [name.strip() for name in os.environ.get("SANITIZE", "").split(",") if name.strip()]
    unknown = [name for name in names if name not in SANITIZERS]
    if unknown:
        raise SystemExit(f"SANITIZE: unknown sanitizer {', '.join(unknown)} (known: {', '.join(SANITIZERS)})")
    if "thread" in names and len(names) > 1:
        raise SystemExit("SANITIZE: thread cannot be combined with other sanitizers")
    return names


def build_dir() -> Path:
    """The CMake build directory of this interpreter and of SANITIZE and DEBUG: setup.py's
    build_dir(), by the same rule."""
    suffix = "".join(f"-{name}" for name in sanitizers())
    suffix += "-debug" if os.environ.get("DEBUG", "0") not in ("", "0") else ""
    return ROOT / "build" / f"{sys.implementation.cache_tag}{suffix}"


def compiler() -> list[str]:
    """The C++ compiler of the build: CMake runs $CXX, else c++."""
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
    tests start (Inductor's C++ kernels, torch.utils.cpp_extension, tests/test_runtime.py's CMake build). The
    compiler is not instrumented; with the sanitizer runtime preloaded, the leak check at its exit
    reports the compiler's own allocations and fails the build (Inductor: "No working C++ compiler
    found"). It wraps $CXX, else g++, Inductor's default; the name keeps Inductor's gcc detection."""
    real = os.environ.get("CXX") or "g++"
    path = ROOT / "build" / "compiler-without-sanitizer" / Path(shlex.split(real)[0]).name
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
    """Builds the extension with SANITIZE's sanitizers (pip install --no-build-isolation -e ., which
    passes SANITIZE to CMake, into the build directory of that build) and runs pytest with
    `pytest_args` under them; returns pytest's exit code. The in-tree extension is then the sanitized
    one: a plain `pip install --no-build-isolation -e .` (which copies the module of its own build
    directory, compiling nothing) makes it the plain one again."""
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


def main() -> None:
    if sys.argv[1:2] == ["sanitizer-env"]:
        print("\n".join(f"{name}={value}" for name, value in sanitizer_environment().items()))
    elif sys.argv[1:2] == ["sanitized"] and len(sys.argv) > 2:
        os.execvpe(sys.argv[2], sys.argv[2:], {**os.environ, **sanitizer_environment()})
    elif sys.argv[1:2] == ["test"]:
        sys.exit(build_and_test(sys.argv[2:]))
    else:
        usage = "python tests/sanitizers/harness.py sanitizer-env | sanitized COMMAND [ARGS...] | test [PYTEST ARGS...]"
        raise SystemExit(f"{__doc__}\nusage: {usage}")


if __name__ == "__main__":
    main()

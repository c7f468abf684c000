"""Builds the foo backend's C++ extension (torch_foo._C) with CMake and Ninja.

Build against the torch you run, without build isolation:

    pip install --no-build-isolation -e .        (pip install -v ... shows ninja's [n/N] lines)

CMakeLists.txt says what is built (one target per layer); this file configures it into a fixed build
directory (build_dir(): every way of building is incremental), builds it and copies the module
where setuptools expects it. CMake and Ninja come from the system or from pip (pip install cmake ninja).
Environment, passed to CMake as the options of the same name:
    UNITY=0          compile file by file instead of one translation unit per layer (editing one
                     file of a layer then recompiles that file alone)
    PCH=1            start the torch-using layers from the precompiled header csrc/precompiled.h
    DEBUG=1          -O0 -g (a build directory of its own)
    SANITIZE=address,undefined | thread   instrument everything (a build directory of its own;
                     tests/sanitizers/harness.py runs the tests under them)
    MAX_JOBS=N       at most N compile jobs (default: ninja's, the number of cores + 2)
    CMAKE_ARGS="..." more arguments for the configure step
docs/build-speed.md in the template repository explains the build and where its time goes.
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

# Building imports torch; never let torch autoload a previous (maybe stale) build of this backend.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

from setuptools import Extension, setup  # noqa: E402
from setuptools.command.build_ext import build_ext  # noqa: E402

ROOT = Path(__file__).resolve().parent
# The options and their values when the environment does not set them (CMakeLists.txt describes them).
OPTIONS = {"UNITY": "1", "PCH": "0", "DEBUG": "0"}


def flag(name: str) -> str:
    return "OFF" if os.environ.get(name, OPTIONS[name]) in ("", "0") else "ON"


def sanitize() -> str:
    """SANITIZE without spaces ("address,undefined"); CMake checks the names."""
    return ",".join(name.strip() for name in os.environ.get("SANITIZE", "").split(",") if name.strip())


def build_dir() -> Path:
    """The build directory of this interpreter and configuration: a sanitized or debug build has its
    own, so that switching between them recompiles nothing. tests/sanitizers/harness.py and
    tests/test_runtime.py find it by the same rule."""
    suffix = "".join(f"-{name}" for name in sanitize().split(",") if name)
    suffix += "-debug" if flag("DEBUG") == "ON" else ""
    return ROOT / "build" / f"{sys.implementation.cache_tag}{suffix}"


def tool(name: str) -> str:
    """cmake or ninja: the one next to this interpreter (pip install cmake ninja), else from PATH.
    Always the same one for a build directory: two Ninja versions discard each other's build log."""
    local = Path(sysconfig.get_path("scripts")) / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"{name} not found: pip install cmake ninja")
    return found


class CMakeBuild(build_ext):
    """Builds each extension by configuring and building CMakeLists.txt (its target OUTPUT, the
    module), then copies the module to the path setuptools installs it from."""

    def build_extension(self, ext):
        from torch.utils.cpp_extension import include_paths, library_paths

        build = build_dir()
        build.mkdir(parents=True, exist_ok=True)
        configure = [
            tool("cmake"),
            "-S",
            str(ROOT),
            "-B",
            str(build),
            "-G",
            "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={tool('ninja')}",
            f"-DUNITY={flag('UNITY')}",
            f"-DPCH={flag('PCH')}",
            f"-DDEBUG={flag('DEBUG')}",
            f"-DSANITIZE={sanitize()}",
            f"-DTORCH_INCLUDE_DIRS={';'.join(include_paths())}",
            f"-DTORCH_LIBRARY_DIRS={';'.join(library_paths())}",
            f"-DPYTHON_INCLUDE_DIR={sysconfig.get_paths()['include']}",
            f"-DPYTHON_MODULE_SUFFIX={sysconfig.get_config_var('EXT_SUFFIX')}",
            *shlex.split(os.environ.get("CMAKE_ARGS", "")),
        ]
        if flag("PCH") == "ON":
            # ccache (when the compiler on PATH is ccache's) caches the files compiled with the
            # precompiled header only with this sloppiness.
            os.environ.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros")
        subprocess.run(configure, check=True)
        command = [tool("cmake"), "--build", str(build), "--target", ext.target, *ext.libraries]
        if os.environ.get("MAX_JOBS"):
            command += ["--parallel", os.environ["MAX_JOBS"]]
        subprocess.run(command, check=True)
        built = build / "csrc" / "python" / f"_C{sysconfig.get_config_var('EXT_SUFFIX')}"
        destination = Path(self.get_ext_fullpath(ext.name))
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, destination)
        for library in ext.libraries.values():
            shutil.copy2(build / library, destination.parent / Path(library).name)

    def copy_extensions_to_source(self):
        """pip install -e: setuptools copies each module from build_lib into the package's source; the
        libraries beside it go along."""
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            package = ext.name.rpartition(".")[0]
            built = Path(self.build_lib, *package.split("."))
            for library in ext.libraries.values():
                name = Path(library).name
                shutil.copy2(built / name, Path(build_py.get_package_dir(package)) / name)


class CMakeExtension(Extension):
    """An extension CMake builds: `target` names the module's target in CMakeLists.txt; `libraries`
    maps the targets of other libraries the package loads to the files they make in the build
    directory, copied beside the module."""

    def __init__(self, name: str, target: str, libraries: dict[str, str] | None = None):
        super().__init__(name, sources=[])
        self.target = target
        self.libraries = libraries or {}


setup(
    ext_modules=[
        CMakeExtension(
            "torch_foo._C",
            target="foo_python",
            # The custom operator library, built on PyTorch's stable ABI (csrc/custom_ops/CMakeLists.txt).
            libraries={"foo_custom_ops": "csrc/custom_ops/_custom_ops.so"},
        )
    ],
    cmdclass={"build_ext": CMakeBuild},
)

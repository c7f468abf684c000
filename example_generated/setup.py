"""Builds the foo backend's C++ extension (torch_foo._C) with torch's cpp_extension and ninja.

Build against the torch you run, without build isolation:

    pip install --no-build-isolation -e .

Environment: DEBUG=1 builds with -O0 -g; MAX_JOBS=N limits parallel compile jobs.
docs/build-speed.md in the template repository explains where the build's time goes.
"""

import os
import sys
import sysconfig

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
# Files that register kernels and do host-side bookkeeping but loop over no elements. Most of their
# compile time is optimising inline code from torch's headers: -O1 compiles them about 20% faster and
# the benchmarks do not notice. Kernel loops (Loops.h users, Copy, ...) and csrc/core keep -O3.
LIGHT_SOURCES = {"csrc/python/Module.cpp"} | {
    f"csrc/aten/{name}.cpp" for name in ("Autocast", "Fallback", "RecordStream", "Resize", "Views")
}
LIGHT_FLAGS = [] if DEBUG else ["-O1"]


class BuildExtensionPerFileFlags(BuildExtension):
    """torch's BuildExtension with two changes: a fixed build directory, so that every way of building
    is incremental, and a second ninja run, in its own directory, for LIGHT_SOURCES with LIGHT_FLAGS
    appended (torch's compiles all sources with one set of flags, from one ninja file)."""

    def finalize_options(self):
        super().finalize_options()
        # pip install -e compiles in a fresh temporary directory each time; keep the objects where
        # `setup.py build_ext --inplace` keeps them, so that both recompile only what changed.
        self.build_temp = str(ROOT / "build" / f"temp.{sysconfig.get_platform()}-{sys.implementation.cache_tag}")

    def build_extension(self, ext):
        compile_all = self.compiler.compile

        def compile(sources, output_dir=None, extra_postargs=None, **kwargs):
            light = [source for source in sources if source in LIGHT_SOURCES]
            rest = [source for source in sources if source not in LIGHT_SOURCES]
            objects = compile_all(rest, output_dir=output_dir, extra_postargs=extra_postargs, **kwargs)
            if light:
                light_args = {**extra_postargs, "cxx": [*extra_postargs["cxx"], *LIGHT_FLAGS]}
                light_dir = os.path.join(output_dir, "light")
                objects += compile_all(light, output_dir=light_dir, extra_postargs=light_args, **kwargs)
            return objects

        self.compiler.compile = compile
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_all


setup(
    ext_modules=[
        CppExtension(
            name="torch_foo._C",
            sources=SOURCES,
            extra_compile_args={"cxx": CXX_FLAGS},
            extra_link_args=["-fopenmp"],
        )
    ],
    cmdclass={"build_ext": BuildExtensionPerFileFlags.with_options(use_ninja=True)},
)

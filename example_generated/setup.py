"""Builds the foo backend's C++ extension (torch_foo._C) with torch's cpp_extension and ninja.

Build against the torch you run, without build isolation:

    pip install --no-build-isolation -e .

The driver (csrc/runtime) and the operator library (csrc/kernels) become static libraries that the
extension links; build_config.py says which sources form each part and with which flags.
Environment: DEBUG=1 builds with -O0 -g; MAX_JOBS=N limits parallel compile jobs.
docs/build-speed.md in the template repository explains where the build's time goes.
"""

import os
import sys
from pathlib import Path

# Building imports torch; never let torch autoload a previous (maybe stale) build of this backend.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

import build_config as config  # noqa: E402

RUNTIME_SOURCES = config.sources(config.RUNTIME_DIRS)
KERNEL_SOURCES = config.sources(config.KERNEL_DIRS)
EXTENSION_SOURCES = config.sources(config.EXTENSION_DIRS)


class BuildBackend(BuildExtension):
    """torch's BuildExtension with three changes: a fixed build directory (build_config.build_dir),
    so that every way of building is incremental; LIGHT_SOURCES compiled with light_flags() appended
    (torch's compiles all sources with one set of flags, from one ninja file); and the runtime and
    kernel sources archived into the two static libraries the extension links."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = str(config.build_dir())

    def build_extension(self, ext):
        compile_all = self.compiler.compile

        def compile(sources, output_dir=None, extra_postargs=None, **kwargs):
            light = [source for source in sources if source in config.LIGHT_SOURCES]
            rest = [source for source in sources if source not in config.LIGHT_SOURCES]
            objects = compile_all(rest, output_dir=output_dir, extra_postargs=extra_postargs, **kwargs)
            if light:
                light_args = {**extra_postargs, "cxx": [*extra_postargs["cxx"], *config.light_flags()]}
                light_dir = os.path.join(output_dir, "light")
                objects += compile_all(light, output_dir=light_dir, extra_postargs=light_args, **kwargs)
            return self._archive(rest + light, objects)

        self.compiler.compile = compile
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_all

    def _archive(self, sources, objects):
        """Replaces the runtime's and the kernels' objects (`objects` are those of `sources`, in
        order) by their static libraries, kernels first since they call the runtime: the extension
        links the runtime library the conformance test links."""
        by_source = dict(zip(sources, objects, strict=True))
        extension = [by_source[source] for source in sources if source in EXTENSION_SOURCES]
        for name, group in ((config.KERNELS_LIBRARY, KERNEL_SOURCES), (config.RUNTIME_LIBRARY, RUNTIME_SOURCES)):
            library = config.library_path(name)
            members = [by_source[source] for source in group]
            if not library.exists() or any(os.path.getmtime(o) > library.stat().st_mtime for o in members):
                library.unlink(missing_ok=True)
                self.compiler.create_static_lib(members, name, output_dir=str(library.parent))
            extension.append(str(library))
        return extension


setup(
    ext_modules=[
        CppExtension(
            name="torch_foo._C",
            sources=EXTENSION_SOURCES + KERNEL_SOURCES + RUNTIME_SOURCES,
            extra_compile_args={"cxx": config.cxx_flags()},
            include_dirs=config.INCLUDE_DIRS + config.extension_include_dirs(),
            library_dirs=config.LIBRARY_DIRS,
            libraries=config.LIBRARIES,
            extra_link_args=config.link_flags(),
        )
    ],
    cmdclass={"build_ext": BuildBackend.with_options(use_ninja=True)},
)

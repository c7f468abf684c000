"""Builds the foo backend's C++ extension (torch_foo._C) with torch's cpp_extension and ninja.

Build against the torch you run, without build isolation:

    pip install --no-build-isolation -e .

The driver (csrc/runtime) and the operator library (csrc/kernels) become static libraries that the
extension links; build_config.py says which sources form each part and with which flags.
Environment: UNITY=0 compiles the extension and the driver file by file instead of in a few groups
(fast rebuilds while editing); DEBUG=1 builds with -O0 -g; MAX_JOBS=N limits parallel compile jobs;
PCH=0 builds without the precompiled header (build_config.py).
docs/build-speed.md in the template repository explains where the build's time goes.
"""

import os
import re
import sys
from pathlib import Path

# Building imports torch; never let torch autoload a previous (maybe stale) build of this backend.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from setuptools import setup  # noqa: E402
from torch.utils import cpp_extension  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

import build_config as config  # noqa: E402

ROOT = Path(__file__).resolve().parent
RUNTIME_SOURCES = config.sources(config.RUNTIME_DIRS)
KERNEL_SOURCES = config.sources(config.KERNEL_DIRS)
EXTENSION_SOURCES = config.sources(config.EXTENSION_DIRS)
if config.use_precompiled_header():
    # ccache (which torch puts in front of the compiler when it is on PATH) caches the files compiled
    # with the precompiled header only with this sloppiness; without it, it compiles them every time.
    os.environ.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros")


def unity_sources() -> dict[str, list[str]]:
    """Writes the unity build's translation units into the build directory (each only when its text
    changed, so that ninja recompiles only the groups that changed) and returns each one's path
    (relative to the root, as the other sources) with the sources it compiles. Without UNITY, each
    source of the extension and the driver is its own translation unit."""
    if not config.unity():
        return {source: [source] for source in [*EXTENSION_SOURCES, *RUNTIME_SOURCES]}
    directory = config.build_dir() / "unity"
    directory.mkdir(parents=True, exist_ok=True)
    units = {}
    for name, group in config.unity_groups(EXTENSION_SOURCES, RUNTIME_SOURCES).items():
        unit = directory / f"{name}.cpp"
        text = config.unity_source(group)
        if not unit.exists() or unit.read_text() != text:
            unit.write_text(text)
        units[unit.relative_to(ROOT).as_posix()] = group
    return units


# What the extension and the driver compile: their sources, or (UNITY=1) the translation units that
# group them.
UNITS = unity_sources()
EXTENSION_UNITS = [unit for unit, group in UNITS.items() if group[0] in EXTENSION_SOURCES]
RUNTIME_UNITS = [unit for unit, group in UNITS.items() if group[0] in RUNTIME_SOURCES]


class BuildBackend(BuildExtension):
    """torch's BuildExtension with four changes: a fixed build directory (build_config.build_dir), so
    that every way of building is incremental; per-file flags in torch's one ninja run (the
    optimisation level of optimisation_flags(), the precompiled header for the files that start
    from it, which the same run builds first); and the runtime and kernel sources archived into the
    two static libraries the extension links. torch writes one set of flags for all sources:
    complete_ninja_file() adds the rest to the ninja file it wrote, before ninja runs."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = str(config.build_dir())

    def build_extension(self, ext):
        compile_all = self.compiler.compile
        write_ninja_file = cpp_extension._write_ninja_file

        def write_and_complete(path, *args, **kwargs):
            write_ninja_file(path, *args, **kwargs)
            complete_ninja_file(Path(path))

        def compile(sources, output_dir=None, **kwargs):
            return self._archive(sources, compile_all(sources, output_dir=output_dir, **kwargs))

        self.compiler.compile = compile
        cpp_extension._write_ninja_file = write_and_complete
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_all
            cpp_extension._write_ninja_file = write_ninja_file

    def _archive(self, sources, objects):
        """Replaces the runtime's and the kernels' objects (`objects` are those of `sources`, in
        order) by their static libraries, kernels first since they call the runtime: the extension
        links the runtime library the conformance test links."""
        by_source = dict(zip(sources, objects, strict=True))
        extension = [by_source[source] for source in sources if source in EXTENSION_UNITS]
        for name, group in ((config.KERNELS_LIBRARY, KERNEL_SOURCES), (config.RUNTIME_LIBRARY, RUNTIME_UNITS)):
            library = config.library_path(name)
            members = [by_source[source] for source in group]
            if not library.exists() or any(os.path.getmtime(o) > library.stat().st_mtime for o in members):
                library.unlink(missing_ok=True)
                self.compiler.create_static_lib(members, name, output_dir=str(library.parent))
            extension.append(str(library))
        return extension


def build_order(unit: str) -> tuple[int, int]:
    """Where the build statement of `unit` (a translation unit, relative to the root) goes in the ninja
    file. Ninja starts the jobs that are ready in the order of its build file, and a long job that
    starts last keeps the build waiting for it while the other job idles: the unity groups first, in
    the order of unity_groups() (the longest first), then the files that include torch's headers,
    then the rest, each the largest first."""
    if UNITS.get(unit, [unit]) != [unit]:
        return (0, list(UNITS).index(unit))
    includes_torch = config.starts_from_precompiled_header(unit)
    return (1 if includes_torch else 2, -(ROOT / unit).stat().st_size)


def complete_ninja_file(path: Path) -> None:
    """Adds the per-file flags and the precompiled header to the ninja file torch wrote at `path`, and
    orders its build statements (build_order(); setuptools passes the sources to torch sorted by path):
    each `build <object>: compile <source>` statement gets its own post_cflags when its source needs
    more than the common flags, and the files that start from the precompiled header depend on it,
    so ninja builds it first (the torch-free files of the driver and the kernels compile meanwhile)."""
    pch = config.use_precompiled_header()
    header = path.parent / "pch" / Path(config.PRECOMPILED_HEADER).name
    if pch:
        header.parent.mkdir(exist_ok=True)
        text = (ROOT / config.PRECOMPILED_HEADER).read_text()
        if not header.exists() or header.read_text() != text:
            header.write_text(text)  # the copy the .gch sits beside, rewritten only when it changed
    head: list[str] = []  # the variables and rules torch wrote, before its first build statement
    statements: list[tuple[tuple[int, int], list[str]]] = []
    tail: list[str] = []
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"build (\S+): compile (\S+)", line)
        if not match:
            if statements and line.startswith(" "):
                statements[-1][1].append(line)  # a variable of the statement before
            else:
                (tail if statements else head).append(line)
            continue
        source = Path(match.group(2)).resolve().relative_to(ROOT).as_posix()
        # A unity translation unit has the flags of its sources (a group has one optimisation level).
        grouped = UNITS.get(source, [source])
        flags = config.optimisation_flags(grouped[0])
        if pch and config.starts_from_precompiled_header(grouped[0]):
            line += f" | {header}.gch"
            flags += ["-include", str(header), "-Winvalid-pch", "-fpch-preprocess"]
        statement = [line, f"  post_cflags = $post_cflags {' '.join(flags)}"] if flags else [line]
        statements.append((build_order(source), statement))
    if pch:
        # First among the build statements: every file of the extension waits for it.
        head += [
            "rule precompile",
            "  command = $cxx -MMD -MF $out.d $cflags -x c++-header $in -o $out $post_cflags",
            "  depfile = $out.d",
            "  deps = gcc",
            f"build {header}.gch: precompile {header}",
            "",
        ]
    ordered = [line for _, statement in sorted(statements, key=lambda item: item[0]) for line in statement]
    path.write_text("\n".join([*head, *ordered, *tail]) + "\n")


setup(
    ext_modules=[
        CppExtension(
            name="torch_foo._C",
            sources=[*EXTENSION_UNITS, *KERNEL_SOURCES, *RUNTIME_UNITS],
            extra_compile_args={"cxx": config.cxx_flags()},
            include_dirs=config.INCLUDE_DIRS + config.extension_include_dirs(),
            library_dirs=config.LIBRARY_DIRS,
            libraries=config.LIBRARIES,
            extra_link_args=config.link_flags(),
        )
    ],
    cmdclass={"build_ext": BuildBackend.with_options(use_ninja=True)},
)

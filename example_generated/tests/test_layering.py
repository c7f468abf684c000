"""The layers and the two seams a hardware port replaces, checked in the sources (no build needed):

- csrc/runtime/ (the driver) and csrc/kernels/ (the operator library) are C APIs with no PyTorch
  includes; inside the operator library only the emulated device's math library
  (csrc/kernels/emulated/host_math.cpp) borrows PyTorch's CPU operators;
- nothing outside those two directories uses what exists only on the emulated device
  (emulation.h, fooEmu* functions, a kernel context's address translation) or the driver's
  internals (driver.h, internal.h, tracing_records.h): everything above them calls runtime.h (with
  its tracing.h) and kernels.h only, so replacing the two implementations is the whole port;
- torch's private headers are included only in csrc/compat/, or by the files PRIVATE_HEADERS_ALLOWED
  names for a documented extension point, so that a torch upgrade has one place to adapt;
- no layer includes a header of a layer above it, nor an optional feature's directory another's: the
  layers are, from the bottom, runtime, kernels, core, aten, the features (families, compile,
  profiler, distributed, custom_ops), python, as CMake's links state them. A lower layer that a
  feature changes offers a seam the feature's own file fills (the CPU fallback's, csrc/aten/Fallback.h;
  the module's bindings, csrc/python/Bindings.h). csrc/compat/ (private PyTorch API) is below them all.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
SOURCES = sorted(p for p in CSRC.rglob("*") if p.suffix in {".cpp", ".h"})
TORCH_INCLUDE = re.compile(r'#include [<"](ATen|c10|torch|pybind11)/')
EMULATION_ONLY = re.compile(r'emulation\.h|emulated/|fooEmu|->address\(|(?:driver|internal|tracing_records)\.h"')
TORCH_FREE = ("runtime", "kernels")
PORTED = ("runtime", "kernels")
MATH_LIBRARY = CSRC / "kernels" / "emulated" / "host_math.cpp"
# The interfaces of the two seams: what the code above them may include.
PUBLIC_HEADERS = {
    "runtime.h",
    "tracing.h",
    "kernels.h",
    "native.h",
    "custom_ops.h",
    "attention.h",
    "histogram.h",
    "recurrent.h",
}
# Each directory's rank: a file includes headers of its own directory and of lower ranks only.
RANKS = {
    "compat": 0,
    "runtime": 1,
    "kernels": 2,
    "core": 3,
    "aten": 4,
    "families": 5,
    "compile": 5,
    "profiler": 5,
    "distributed": 5,
    "custom_ops": 5,
    "python": 6,
}


def code(path: Path) -> str:
    """The file without its comments: prose may name the emulation, code may not use it."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def layer(path: Path) -> str:
    return path.relative_to(CSRC).parts[0]


def test_sources_found():
    assert {layer(p) for p in SOURCES} >= {"runtime", "kernels", "core", "aten", "python"}


@pytest.mark.parametrize("path", [p for p in SOURCES if layer(p) in TORCH_FREE], ids=str)
def test_driver_and_operator_library_do_not_include_pytorch(path):
    if path == MATH_LIBRARY:
        pytest.skip("the emulated device's math library is PyTorch's CPU operators")
    includes = TORCH_INCLUDE.findall(code(path))
    assert not includes, f"{path.relative_to(ROOT)} includes PyTorch headers ({', '.join(sorted(set(includes)))})"


@pytest.mark.parametrize("path", [p for p in SOURCES if layer(p) not in PORTED], ids=str)
def test_integration_code_uses_only_the_two_seams(path):
    text = code(path)
    uses = sorted(set(EMULATION_ONLY.findall(text)))
    assert not uses, f"{path.relative_to(ROOT)} uses emulation-only or driver-internal API: {uses}"
    for include in re.findall(r'#include "([^"]+)"', text):
        target = (path.parent / include).resolve()
        if target.is_relative_to(CSRC):
            in_seam = target.relative_to(CSRC).parts[0] in PORTED
            assert not in_seam or target.name in PUBLIC_HEADERS, f"{path.name} includes {include}"


# torch's headers, public and private. Public: the tensor and operator API (ATen/ATen.h, ATen/core/,
# the per-operator headers ATen/ops/<op>.h, <op>_ops.h and <op>_native.h, the kernels torch registers
# for every backend), c10/core/ and c10/util/ outside impl/, torch/library.h and the C++ frontend
# (torch/<name>.h), the stable ABI (torch/csrc/stable/, torch/headeronly/) and pybind11. Private:
# the rest of torch/csrc/ (the sources of libtorch and libtorch_python), ATen/native/ (the kernels'
# internals), ATen/detail/ and c10's impl/ directories (interfaces between torch's own libraries) and
# the structured meta functions (ATen/ops/<op>_meta.h). A private header is included only by
# csrc/compat/ (compat/TorchCompat.h lists its touchpoints), or by a file below, for a documented
# extension point whose header happens to live among the internals.
PRIVATE_HEADER = re.compile(
    r'#include\s*[<"]((?:torch/csrc/(?!stable/)|ATen/native/|ATen/detail/|c10/(?:\w+/)*impl/)[^>"]*|ATen/ops/\w+_meta\.h)[>"]'
)
CPU_FALLBACK = "at::native::cpu_fallback, the boxed CPU fallback of PyTorch's PrivateUse1 documentation"
C10D = "c10d::Backend, Work and their types: the API of PyTorch's custom c10d backend tutorial"
PRIVATE_HEADERS_ALLOWED = {
    "core/GuardImpl.cpp": {
        "c10/core/impl/DeviceGuardImplInterface.h": "C10_REGISTER_GUARD_IMPL (the PrivateUse1 documentation)",
    },
    "core/Hooks.cpp": {
        "ATen/detail/PrivateUse1HooksInterface.h": "at::PrivateUse1HooksInterface (the PrivateUse1 documentation)",
    },
    "aten/Fallback.h": {"ATen/native/CPUFallback.h": CPU_FALLBACK},
    "aten/FallbackStaged.cpp": {
        "c10/core/impl/LocalDispatchKeySet.h": "ExcludeDispatchKeyGuard: the host function of a staged fallback "
        "operator (a graph capture's or the asynchronous fallback's) must not enter Python "
        "(docs/integration/cpu-fallback.md)",
    },
    "families/WiderDtypes.cpp": {"ATen/native/CPUFallback.h": CPU_FALLBACK},
    "families/Attention.cpp": {
        "ATen/native/DispatchStub.h": "REGISTER_PRIVATEUSE1_DISPATCH (the PrivateUse1 documentation)",
    },
    "kernels/emulated/host_math.cpp": {
        "c10/core/impl/LocalDispatchKeySet.h": "c10::impl::ExcludeDispatchKeyGuard (the dispatcher tutorial)",
    },
    "distributed/Arguments.h": {"torch/csrc/distributed/c10d/Backend.hpp": C10D},
    "distributed/Backend.cpp": {"torch/csrc/distributed/c10d/Backend.hpp": C10D},
    "distributed/GlooTransport.cpp": {"torch/csrc/distributed/c10d/Backend.hpp": C10D},
    "distributed/Group.h": {"torch/csrc/distributed/c10d/Types.hpp": C10D},
    "distributed/Work.h": {"torch/csrc/distributed/c10d/Work.hpp": C10D},
}


def private_headers(path: Path) -> set[str]:
    return set(PRIVATE_HEADER.findall(code(path)))


@pytest.mark.parametrize("path", [p for p in SOURCES if layer(p) != "compat"], ids=str)
def test_private_torch_headers_only_in_compat(path):
    allowed = PRIVATE_HEADERS_ALLOWED.get(path.relative_to(CSRC).as_posix(), {})
    leaks = sorted(private_headers(path) - allowed.keys())
    assert not leaks, (
        f"{path.relative_to(ROOT)} includes torch's private headers {leaks}: include them in a header of "
        "csrc/compat/ (a touchpoint of compat/TorchCompat.h), or, for a documented extension point, name the "
        "file and the header with the reason in PRIVATE_HEADERS_ALLOWED"
    )


def test_private_header_allow_list_is_current():
    """An entry whose file is gone, or no longer includes its header, is removed, so that the list
    stays the list."""
    for name, headers in PRIVATE_HEADERS_ALLOWED.items():
        path = CSRC / name
        assert path.is_file(), f"PRIVATE_HEADERS_ALLOWED names {name}, which this project does not have"
        stale = sorted(headers.keys() - private_headers(path))
        assert not stale, f"PRIVATE_HEADERS_ALLOWED names {stale} for {name}, which no longer includes them"


def test_private_header_pattern():
    for header in ("torch/csrc/Event.h", "ATen/native/Resize.h", "ATen/ops/mm_meta.h", "c10/core/impl/PyInterpreter.h"):
        assert PRIVATE_HEADER.search(f"#include <{header}>"), header
    for header in ("torch/csrc/stable/library.h", "torch/library.h", "ATen/ops/mm_native.h", "c10/core/Allocator.h"):
        assert not PRIVATE_HEADER.search(f"#include <{header}>"), header


def upward_includes(path: Path, csrc: Path = CSRC) -> list[str]:
    """The includes of `path` (a file under `csrc`) that name a header of a directory not below its own."""
    own = path.relative_to(csrc).parts[0]
    found = []
    for include in re.findall(r'#include "([^"]+)"', code(path)):
        target = (path.parent / include).resolve()
        if not target.is_relative_to(csrc.resolve()) or len(target.relative_to(csrc.resolve()).parts) < 2:
            continue
        other = target.relative_to(csrc.resolve()).parts[0]
        if other != own and RANKS[other] >= RANKS[own]:
            found.append(f"{include} ({other}/ is not below {own}/)")
    return found


def test_every_directory_has_a_rank():
    assert {layer(p) for p in SOURCES if len(p.relative_to(CSRC).parts) > 1} <= set(RANKS)


@pytest.mark.parametrize("path", [p for p in SOURCES if layer(p) in RANKS], ids=str)
def test_no_upward_include(path):
    upward = upward_includes(path)
    assert not upward, (
        f"{path.relative_to(ROOT)} includes {', '.join(upward)}: a lower layer offers a seam that the higher one"
        " fills instead (csrc/aten/Fallback.h, csrc/python/Bindings.h)"
    )


def test_the_rule_finds_an_upward_include(tmp_path):
    """The check on a small tree: the operators' layer including a feature's header and the module's."""
    (tmp_path / "aten").mkdir()
    source = tmp_path / "aten" / "Probe.cpp"
    source.write_text(
        '#include "../families/Anything.h"\n#include "../python/Bindings.h"\n#include "../core/Device.h"\n'
        '#include "Fallback.h"\n// #include "../compile/InAComment.h"\n'
    )
    assert upward_includes(source, tmp_path) == [
        "../families/Anything.h (families/ is not below aten/)",
        "../python/Bindings.h (python/ is not below aten/)",
    ]

"""The two seams a hardware port replaces, checked in the sources (no build needed):

- csrc/runtime/ (the driver) and csrc/kernels/ (the operator library) are C APIs with no PyTorch
  includes; inside the operator library only the emulated device's math library
  (csrc/kernels/emulated/host_math.cpp) borrows PyTorch's CPU operators;
- nothing outside those two directories uses what exists only on the emulated device
  (emulation.h, fooEmu* functions, a kernel context's address translation) or the driver's
  internals (driver.h, internal.h, tracing_records.h): everything above them calls runtime.h (with
  its tracing.h) and kernels.h only, so replacing the two implementations is the whole port.
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
PUBLIC_HEADERS = {"runtime.h", "tracing.h", "kernels.h", "custom_ops.h", "attention.h", "histogram.h"}


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

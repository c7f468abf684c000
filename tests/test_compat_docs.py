"""docs/integration/compat.md lists every private torch API the generated backend touches: each
touchpoint of the example's torch_foo/_compat.py and each header of csrc/compat/."""

import ast
import re

from conftest import ROOT

DOC = (ROOT / "docs" / "integration" / "compat.md").read_text()
EXAMPLE = ROOT / "example_generated"


def touchpoints() -> list[tuple[str, str, str]]:
    """(name, module, attribute) of every Touchpoint(...) in the example's _compat.py, read without
    importing it."""
    tree = ast.parse((EXAMPLE / "torch_foo" / "_compat.py").read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Touchpoint":
            name, _feature, module, attribute = (ast.literal_eval(arg) for arg in node.args[:4])
            found.append((name, module, attribute))
    return found


def test_every_python_touchpoint_is_listed():
    found = touchpoints()
    assert len(found) > 30
    prose = re.sub(r"```.*?```", "", DOC, flags=re.S)
    quoted = set(re.findall(r"`([^`]+)`", prose))
    text = " ".join(quoted)
    for name, module, _attribute in found:
        last = name.rsplit(".", 1)[-1]
        assert name in quoted or f".{last}" in quoted or last in text, f"compat.md does not list {name}"
        # test_docs reads `x.cpp` as a file name: a module named cpp is written as its package ("its `cpp` module")
        written = module.removesuffix(".cpp")
        assert written in text, f"compat.md does not say where torch has {name} ({module})"


def test_every_compat_header_is_listed():
    headers = sorted(path.name for path in (EXAMPLE / "csrc" / "compat").glob("*.h"))
    assert headers
    for header in headers:
        assert header in DOC, f"compat.md does not list csrc/compat/{header}"

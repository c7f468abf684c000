"""The runtime API on its own: tests/runtime_test.cpp compiled with csrc/runtime/runtime.cpp and no
PyTorch, with and without strict memory mode. A port to hardware can run it against its own
runtime.cpp."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def runtime_test(tmp_path_factory) -> Path:
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    assert compiler, "a C++ compiler is needed (the extension was built with one)"
    executable = tmp_path_factory.mktemp("runtime") / "runtime_test"
    sources = [ROOT / "tests" / "runtime_test.cpp", ROOT / "csrc" / "runtime" / "runtime.cpp"]
    command = [compiler, "-std=c++17", "-O1", "-pthread", "-fopenmp", *map(str, sources), "-o", str(executable)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return executable


@pytest.mark.parametrize("strict", ["0", "1"], ids=["default", "strict"])
def test_runtime_conformance(runtime_test, strict):
    env = dict(os.environ)
    env.update({"FOO_DEVICE_COUNT": "2", "FOO_DEVICE_MEMORY": "64M", "FOO_STRICT_MEMORY": strict})
    result = subprocess.run([str(runtime_test)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "runtime conformance: all checks passed" in result.stdout

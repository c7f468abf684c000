"""The driver on its own, without PyTorch: tests/runtime/contract_test.cpp (the contract of
csrc/runtime/runtime.h and its tracing.h, which a hardware port runs unchanged) and tests/runtime/emulation_test.cpp
(the emulated device's own behaviour), each linked with the runtime library the extension links
(build_config.py says where the build put it, and with which flags: a sanitized build, SANITIZE=...,
instruments these programs too)."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import build_config  # noqa: E402

TESTS = ROOT / "tests" / "runtime"


def compile_program(output: Path, *sources: Path, shared: bool = False) -> Path:
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    assert compiler, "a C++ compiler is needed (the extension was built with one)"
    command = [compiler, build_config.CXX_STANDARD, "-O1", "-pthread", *map(str, sources), "-o", str(output)]
    command += build_config.sanitizer_flags()
    command += [f"-I{directory}" for directory in build_config.INCLUDE_DIRS]
    if shared:
        command += ["-shared", "-fPIC"]
    else:
        library = build_config.library_path(build_config.RUNTIME_LIBRARY)
        if not library.exists():
            pytest.fail(f"{library} is missing: build the project first (pip install --no-build-isolation -e .)")
        command += [str(library), *build_config.link_flags()]
        command += [f"-L{directory}" for directory in build_config.LIBRARY_DIRS]
        command += [f"-l{name}" for name in build_config.LIBRARIES]
    # The compiler is not instrumented: a sanitizer runtime preloaded for the tests would report its leaks.
    environment = {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 0, result.stderr
    return output


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("runtime")
    return {
        "contract": compile_program(
            out / "contract_test",
            TESTS / "contract_test.cpp",
            TESTS / "tracing_contract.cpp",
            TESTS / "emulated_test_kernels.cpp",
        ),
        "emulation": compile_program(out / "emulation_test", TESTS / "emulation_test.cpp"),
        "module": compile_program(out / "add_one.so", TESTS / "add_one_module.cpp", shared=True),
    }


def run(program: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "FOO_DEVICE_MEMORY": "64M", **env}
    return subprocess.run([str(program), *args], capture_output=True, text=True, env=environment, timeout=300)


@pytest.mark.parametrize("strict", ["0", "1"], ids=["default", "strict"])
@pytest.mark.parametrize("devices", ["1", "2"])
def test_runtime_contract(programs, strict, devices):
    result = run(programs["contract"], FOO_STRICT_MEMORY=strict, FOO_DEVICE_COUNT=devices)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "runtime contract: all checks passed" in result.stdout


@pytest.mark.parametrize("strict", ["0", "1"], ids=["default", "strict"])
def test_emulation(programs, strict):
    result = run(programs["emulation"], "--module", str(programs["module"]), FOO_STRICT_MEMORY=strict)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "runtime emulation: all checks passed" in result.stdout


def test_environment_configures_the_devices(programs):
    result = run(
        programs["emulation"],
        FOO_DEVICE_COUNT="3",
        FOO_DEVICE_MEMORY="32M",
        EXPECT_DEVICE_COUNT="3",
        EXPECT_DEVICE_MEMORY=str(32 << 20),
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("FOO_DEVICE_COUNT", "two", "ignoring FOO_DEVICE_COUNT=two"),
        ("FOO_DEVICE_MEMORY", "8X", "ignoring FOO_DEVICE_MEMORY=8X"),
        ("FOO_FAULTS", "disk:1", "ignoring FOO_FAULTS=disk:1 (unknown kind"),
        ("FOO_FAULTS", "malloc:0", "ignoring FOO_FAULTS=malloc:0 (a count is N or N-M"),
        ("FOO_FAULTS", "malloc:3-2", "ignoring FOO_FAULTS=malloc:3-2 (a count is N or N-M"),
        ("FOO_FAULTS", "kernel:p=2", "ignoring FOO_FAULTS=kernel:p=2 (a probability is a number from 0 to 1"),
        ("FOO_FAULTS", "memcpy", "ignoring FOO_FAULTS=memcpy (an item is not KIND:VALUE"),
    ],
)
def test_unparsable_setting_keeps_the_default(programs, variable, value, expected):
    # The default is the device count the project was rendered with (copier.yml: device_count).
    result = run(programs["emulation"], EXPECT_DEVICE_COUNT="2", **{variable: value})
    assert result.returncode == 0, result.stdout + result.stderr
    assert expected in result.stderr


@pytest.mark.parametrize(
    ("mode", "explanation"),
    [
        ("--touch-from-host", "host code read or wrote device memory directly"),
        ("--touch-from-kernel", "a kernel used a device pointer without translating it"),
    ],
)
def test_strict_memory_explains_the_crash(programs, mode, explanation):
    result = run(programs["emulation"], mode, FOO_STRICT_MEMORY="1", **build_config.crash_environment())
    assert result.returncode == -signal.SIGSEGV, result.stdout + result.stderr
    assert f"foo strict memory mode: {explanation}" in result.stderr


def test_exit_while_other_threads_use_the_runtime(programs):
    """main() returns while four threads keep allocating, launching, copying and freeing: exit
    drains and stops the stream workers, and the runtime's state outlives static destruction. (A
    sanitizer's report may lose the race with the exit and leave the exit code alone: stderr shows it.)"""
    for attempt in range(5):
        result = run(programs["emulation"], "--exit-while-busy")
        assert result.returncode == 0 and not result.stderr, f"attempt {attempt}: {result.stdout}{result.stderr}"
        assert "exiting with" in result.stdout

"""The driver on its own, without PyTorch: tests/runtime/contract_test.cpp (the contract of
csrc/runtime/runtime.h and its tracing.h, which a hardware port runs unchanged) and tests/runtime/emulation_test.cpp
(the emulated device's own behaviour), each linked with the runtime library the extension links.
CMake builds them (tests/runtime/CMakeLists.txt, target runtime_tests) in the project's build directory
(tests/sanitizers/harness.py build_dir(): a sanitized build, SANITIZE=..., instruments these programs
too); `ctest --test-dir <build directory>` runs their basic checks without Python."""

import os
import signal
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "sanitizers"))
import harness  # noqa: E402
from numerics import DRIVER  # noqa: E402


def cmake_tool(name: str) -> str:
    """The cmake (name CMAKE_COMMAND) or ctest (CMAKE_CTEST_COMMAND) that configured the build directory."""
    for line in (harness.build_dir() / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split("=", 1)[1]
    raise AssertionError(f"{name} is not in {harness.build_dir() / 'CMakeCache.txt'}")


def configured() -> bool:
    return (harness.build_dir() / "CMakeCache.txt").exists()


@pytest.fixture(scope="module")
def programs() -> dict[str, Path]:
    build = harness.build_dir()
    tests = build / "tests" / "runtime"
    found = {"contract": tests / "contract_test"}
    if DRIVER == "emulated":  # the emulated device's own test program and the module it loads
        found.update(emulation=tests / "emulation_test", module=tests / "add_one.so")
    if DRIVER == "opencl":  # the OpenCL operator library against host computations
        found.update(kernels=tests / "opencl_kernels_test")
    if configured():
        # The compiler is not instrumented: a sanitizer runtime preloaded for the tests would report its leaks.
        environment = {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}
        command = [cmake_tool("CMAKE_COMMAND"), "--build", str(build), "--target", "runtime_tests"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment)
        assert result.returncode == 0, result.stdout + result.stderr
    elif not all(path.exists() for path in found.values()):
        # (Programs without a configured directory: copied from a build of the same sources.)
        pytest.fail(f"{build} is not configured: build the project first (pip install --no-build-isolation -e .)")
    return found


def test_ctest_runs_the_checks(programs, tmp_path):
    """The checks CMake registers (tests/runtime/CMakeLists.txt) pass under ctest, as a porter runs them."""
    if not configured():
        pytest.skip("the programs were copied from another build directory, which ctest would run")
    environment = {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}
    report = tmp_path / "ctest.xml"
    command = [cmake_tool("CMAKE_CTEST_COMMAND"), "--test-dir", str(harness.build_dir()), "--output-on-failure"]
    command += ["--output-junit", str(report)]  # what ran, read as data: ctest's summary line differs by release
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment)
    assert result.returncode == 0, result.stdout + result.stderr
    cases = ElementTree.parse(report).getroot().iter("testcase")
    outcomes = {case.get("name"): case.get("status") for case in cases}
    # The contract in two configurations at least (each driver registers its own: tests/runtime/CMakeLists.txt).
    contract = [name for name in outcomes if name.startswith("contract_")]
    assert len(contract) >= 2 and set(outcomes.values()) == {"run"}, outcomes


def run(program: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "FOO_DEVICE_MEMORY": "64M", **env}
    return subprocess.run([str(program), *args], capture_output=True, text=True, env=environment, timeout=300)


@pytest.mark.parametrize("strict", ["0", "1"], ids=["default", "strict"])
@pytest.mark.parametrize("devices", ["1", "2"])
def test_runtime_contract(programs, strict, devices):
    result = run(programs["contract"], FOO_STRICT_MEMORY=strict, FOO_DEVICE_COUNT=devices)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "runtime contract: all checks passed" in result.stdout


@pytest.mark.emulated_driver("test program (emulation_test.cpp: its module loading, parameter blocks, strict mode)")
@pytest.mark.parametrize("strict", ["0", "1"], ids=["default", "strict"])
def test_emulation(programs, strict):
    result = run(programs["emulation"], "--module", str(programs["module"]), FOO_STRICT_MEMORY=strict)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "runtime emulation: all checks passed" in result.stdout


@pytest.mark.emulated_driver("device count and memory size set by environment variables")
def test_environment_configures_the_devices(programs):
    result = run(
        programs["emulation"],
        FOO_DEVICE_COUNT="3",
        FOO_DEVICE_MEMORY="32M",
        EXPECT_DEVICE_COUNT="3",
        EXPECT_DEVICE_MEMORY=str(32 << 20),
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.emulated_driver("configuration variables (device count, memory size, fault injection)")
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


@pytest.mark.emulated_driver("strict memory mode")
@pytest.mark.parametrize(
    ("mode", "explanation"),
    [
        ("--touch-from-host", "host code read or wrote device memory directly"),
        ("--touch-from-kernel", "a kernel used a device pointer without translating it"),
    ],
)
def test_strict_memory_explains_the_crash(programs, mode, explanation):
    result = run(programs["emulation"], mode, FOO_STRICT_MEMORY="1", **harness.crash_environment())
    assert result.returncode == -signal.SIGSEGV, result.stdout + result.stderr
    assert f"foo strict memory mode: {explanation}" in result.stderr


@pytest.mark.emulated_driver("test program (emulation_test.cpp --exit-while-busy)")
def test_exit_while_other_threads_use_the_runtime(programs):
    """main() returns while four threads keep allocating, launching, copying and freeing: exit
    drains and stops the stream workers, and the runtime's state outlives static destruction. (A
    sanitizer's report may lose the race with the exit and leave the exit code alone: stderr shows it.)"""
    for attempt in range(5):
        result = run(programs["emulation"], "--exit-while-busy")
        assert result.returncode == 0 and not result.stderr, f"attempt {attempt}: {result.stdout}{result.stderr}"
        assert "exiting with" in result.stdout

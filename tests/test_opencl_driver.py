"""The OpenCL driver (csrc/runtime/opencl/, docs/opencl.md): what a render with driver=opencl has, and,
on a machine with OpenCL, its driver built alone (the CMake option RUNTIME_ONLY) passing the contract
test on the default device and on two PoCL devices. The build test skips, naming what is missing,
where OpenCL is not installed, except in CI (CI=true), where it fails: .ci/run and the CI workflow
install PoCL."""

from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

import checks

PACKAGES = "pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo"


def opencl_missing() -> str | None:
    """Why this machine cannot build and run the OpenCL driver, or None."""
    if not any(Path(d, "CL", "cl.h").exists() for d in ("/usr/include", "/usr/local/include")):
        return f"the OpenCL headers are not installed (apt-get install {PACKAGES})"
    if ctypes.util.find_library("OpenCL") is None:
        return f"the OpenCL ICD loader is not installed (apt-get install {PACKAGES})"
    clinfo = shutil.which("clinfo")
    if clinfo is None:
        return f"clinfo is not installed, which tells whether OpenCL has a device (apt-get install {PACKAGES})"
    listing = subprocess.run([clinfo, "-l"], capture_output=True, text=True, timeout=120).stdout
    if "Device" not in listing:
        return f"OpenCL has no device: install a driver (apt-get install pocl-opencl-icd); clinfo -l says {listing!r}"
    return None


def require_opencl() -> None:
    reason = opencl_missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI installs OpenCL (.ci/run), but {reason}")
        pytest.skip(reason)


def test_an_opencl_render_has_the_opencl_driver_and_not_the_emulated_one(render):
    root = render("foo", preset="minimal", driver="opencl")
    runtime, tests = root / "csrc" / "runtime", root / "tests" / "runtime"
    assert (runtime / "opencl" / "devices.cpp").exists() and (runtime / "opencl" / "probe" / "main.cpp").exists()
    assert (tests / "opencl_test_kernels.cpp").exists()
    assert not (runtime / "emulated").exists() and not (runtime / "emulation.h").exists()
    for name in ("emulated_test_kernels.cpp", "emulation_test.cpp", "add_one_module.cpp", "emulated_test_module.cpp"):
        assert not (tests / name).exists(), name
    assert "set(DRIVER opencl)" in (root / "CMakeLists.txt").read_text()
    assert "driver: opencl" in (root / ".copier-answers.yml").read_text()


def test_an_emulated_render_has_no_opencl_driver(render):
    root = render("foo", preset="minimal")
    assert (root / "csrc" / "runtime" / "emulated").exists()
    assert not (root / "csrc" / "runtime" / "opencl").exists()
    assert not (root / "tests" / "runtime" / "opencl_test_kernels.cpp").exists()
    assert "set(DRIVER emulated)" in (root / "CMakeLists.txt").read_text()


def test_the_full_build_of_an_opencl_render_stops_saying_the_operator_library_is_missing(render, tmp_path):
    root = render("foo", preset="minimal", driver="opencl")
    configure = [checks.tool("cmake"), "-S", str(root), "-B", str(tmp_path / "build"), "-G", "Ninja"]
    result = subprocess.run(configure, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "operator library for OpenCL" in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.backend("foo", driver="opencl")
class TestOpenCLDriver:
    """The driver of a render with every feature and driver=opencl, built alone, and the contract
    test run by ctest on the default device and on two PoCL devices (contract_opencl,
    contract_opencl_two_devices)."""

    def test_the_contract_passes_on_one_and_two_devices(self, render, tmp_path):
        require_opencl()
        root = render("foo", driver="opencl")
        build = tmp_path / "runtime"
        configure = [checks.tool("cmake"), "-S", str(root), "-B", str(build), "-G", "Ninja", "-DRUNTIME_ONLY=ON"]
        compile_tests = [checks.tool("cmake"), "--build", str(build), "--target", "runtime_tests"]
        for command in (configure, compile_tests):
            result = subprocess.run(command, capture_output=True, text=True, timeout=900)
            assert result.returncode == 0, result.stdout + result.stderr
        report = tmp_path / "ctest.xml"
        ctest = [checks.tool("ctest"), "--test-dir", str(build), "--output-on-failure", "--output-junit", str(report)]
        result = subprocess.run(ctest, capture_output=True, text=True, timeout=1200)
        assert result.returncode == 0, result.stdout + result.stderr
        outcomes = {
            case.get("name"): case.get("status") for case in ElementTree.parse(report).getroot().iter("testcase")
        }
        assert outcomes == {"contract_opencl": "run", "contract_opencl_two_devices": "run"}, outcomes

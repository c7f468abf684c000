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
import project

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
    assert (root / "csrc" / "kernels" / "opencl" / "library.cpp").exists() and (
        tests / "opencl_kernels_test.cpp"
    ).exists()
    assert not (runtime / "emulated").exists() and not (runtime / "emulation.h").exists()
    assert not (root / "csrc" / "kernels" / "emulated").exists()
    for name in ("emulated_test_kernels.cpp", "emulation_test.cpp", "add_one_module.cpp", "emulated_test_module.cpp"):
        assert not (tests / name).exists(), name
    assert "set(DRIVER opencl)" in (root / "CMakeLists.txt").read_text()
    assert "driver: opencl" in (root / ".copier-answers.yml").read_text()


def test_an_emulated_render_has_no_opencl_driver(render):
    root = render("foo", preset="minimal")
    assert (root / "csrc" / "runtime" / "emulated").exists()
    assert not (root / "csrc" / "runtime" / "opencl").exists()
    assert not (root / "tests" / "runtime" / "opencl_test_kernels.cpp").exists()
    assert (root / "csrc" / "kernels" / "emulated").exists() and not (root / "csrc" / "kernels" / "opencl").exists()
    assert not (root / "tests" / "runtime" / "opencl_kernels_test.cpp").exists()
    assert "set(DRIVER emulated)" in (root / "CMakeLists.txt").read_text()


def test_an_opencl_render_refuses_the_features_whose_kernels_the_opencl_library_lacks(render):
    with pytest.raises(ValueError) as error:
        render("foo", driver="opencl")  # the full preset: every feature on
    message = str(error.value)
    assert "--data compile=false" in message, message
    assert "compile: Inductor does not emit OpenCL C yet" in message
    # no kernels of their own, or kernels the OpenCL library has
    for feature in ("native_operators", "custom_op", "kernel_families", "distributed", "profiler", "graphs", "backend_meta"):
        assert feature not in message, message
    with pytest.raises(
        ValueError, match=r"cannot render with compile on \(compile: Inductor does not emit OpenCL C yet\)"
    ):
        render("foo", preset="minimal", driver="opencl", compile=True)


# The OpenCL kernels and C++ tests of the custom operator and of the kernel families, each rendered
# with its feature and the OpenCL driver only.
FEATURE_KERNELS = {
    "custom_op": ("csrc/kernels/opencl/custom_ops.cpp", "tests/runtime/opencl_custom_ops_test.cpp"),
    "kernel_families": (
        "csrc/kernels/opencl/attention.cpp",
        "csrc/kernels/opencl/histogram.cpp",
        "csrc/kernels/opencl/recurrent.cpp",
        "tests/runtime/opencl_families_test.cpp",
    ),
}


def test_an_opencl_render_has_the_kernels_of_the_custom_operator_and_the_families_it_asks_for(render):
    answers = {"preset": "custom", "driver": "opencl", "native_operators": False, "compile": False}
    with_them = render("foo", **answers, custom_op=True, kernel_families=True)
    without = render("bar", **answers, custom_op=False, kernel_families=False)
    emulated = render("baz", preset="full")
    for paths in FEATURE_KERNELS.values():
        for path in paths:
            assert (with_them / path).exists(), path
            assert not (without / path).exists(), path
            assert not (emulated / path).exists(), path


def test_an_opencl_render_with_native_operators_has_their_opencl_kernels(render):
    """native_operators with driver=opencl: native.h's functions in the OpenCL library, their checks
    in the library's test, and none of the emulated device's kernels."""
    root = render(
        "foo",
        preset="custom",
        driver="opencl",
        native_operators=True,
        custom_op=False,
        kernel_families=False,
        compile=False,
    )
    kernels = root / "csrc" / "kernels"
    assert (kernels / "native.h").is_file()
    assert {"native.cpp", "blas.cpp"} <= {path.name for path in (kernels / "opencl").iterdir()}
    assert not (kernels / "emulated").exists()
    assert (root / "tests" / "runtime" / "opencl_native_checks.h").is_file()
    minimal = render("bar", preset="minimal", driver="opencl")
    assert not (minimal / "csrc" / "kernels" / "opencl" / "native.cpp").exists()
    assert not (minimal / "tests" / "runtime" / "opencl_native_checks.h").exists()
    emulated = render("baz")
    assert not (emulated / "tests" / "runtime" / "opencl_native_checks.h").exists()


def test_an_opencl_render_builds_the_whole_extension(render):
    """No stop in CMake: the operator library covers what a render the validator accepts compiles."""
    root = render("foo", preset="minimal", driver="opencl")
    assert "operator library for OpenCL" not in (root / "CMakeLists.txt").read_text()
    assert 'DRIVER = "opencl"' in (root / "tests" / "numerics.py").read_text()
    assert "EXACT_EVERYWHERE = False" in (root / "tests" / "numerics.py").read_text()


@pytest.mark.slow
@pytest.mark.backend("foo", driver="opencl")
class TestOpenCLDriver:
    """The driver and the operator library of a minimal render with driver=opencl, built alone, and
    their tests run by ctest on the default device and on two PoCL devices (contract_opencl,
    contract_opencl_two_devices, kernels_opencl, kernels_opencl_two_devices), and the library's test
    once more as on a device without cl_khr_fp64 (kernels_opencl_no_fp64)."""

    def test_the_contract_passes_on_one_and_two_devices(self, render, tmp_path):
        require_opencl()
        root = render("foo", preset="minimal", driver="opencl")
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
        assert outcomes == {
            "contract_opencl": "run",
            "contract_opencl_two_devices": "run",
            "kernels_opencl": "run",
            "kernels_opencl_two_devices": "run",
            "kernels_opencl_no_fp64": "run",
        }, outcomes


# The generated suite's files that exercise the driver through PyTorch: devices and their module,
# tensors and copies in every direction, streams and events, the caching and pinned allocators,
# several devices, random numbers, the operators and training against the CPU. Their not-slow tests
# take about 35 s on two PoCL devices in one process with a warm kernel cache (the build before them
# 1 to 4 minutes); the whole not-slow suite takes about 2.5 minutes with two workers, most of the rest
# the package's Python side, which runs the same on every driver, and tests/test_runtime.py's
# conformance programs (about 80 s), which TestOpenCLDriver runs above.
DRIVER_TESTS = [
    "tests/test_device.py",
    "tests/test_tensors.py",
    "tests/test_copy.py",
    "tests/test_streams.py",
    "tests/test_events.py",
    "tests/test_allocator.py",
    "tests/test_pinned_memory.py",
    "tests/test_multi_device.py",
    "tests/test_random.py",
    "tests/test_ops.py",
    "tests/test_training.py",
]


@pytest.mark.slow
@pytest.mark.backend("foo", preset="minimal", driver="opencl")
class TestMinimalOpenCLBackend:
    """The minimal render with driver=opencl builds as a Python extension and passes the generated
    suite's driver tests (DRIVER_TESTS) on two PoCL devices, so that the multi-device tests run."""

    def test_the_driver_tests_pass_on_two_devices(self, render, monkeypatch):
        require_opencl()
        root = render("foo", preset="minimal", driver="opencl")
        project.build(root, jobs=2)
        monkeypatch.setenv("POCL_DEVICES", "pthread pthread")
        monkeypatch.setenv("FOO_OPENCL_DEVICES", "cpu")  # PoCL's, where a GPU would come first
        code = project.run_tests(root, "-m", "not slow", *DRIVER_TESTS)
        assert code == 0, project.failure_summary(root)
        cases = list(ElementTree.parse(root / project.RESULTS_FILE).getroot().iter("testcase"))
        skipped = [case.get("name") for case in cases if case.find("skipped") is not None]
        multi_device = [case for case in cases if case.get("classname", "").endswith("test_multi_device")]
        assert multi_device and not any(case.find("skipped") is not None for case in multi_device), skipped


# The generated suite's files that exercise the custom operator and the kernel families: bias_gelu
# (with opcheck), attention, sparse tensors, and nn.LSTM and nn.GRU on the fused cells (test_training.py's
# tests that RECURRENT selects); then tests/test_dtype_coverage.py (the dtypes CUDA has and the CPU lacks).
RECURRENT = "lstm or gru or Cell"
FAMILY_TESTS = [
    "tests/test_custom_ops.py",
    "tests/test_attention.py",
    "tests/test_sparse.py",
]


@pytest.mark.slow
@pytest.mark.backend(
    "foo", preset="custom", driver="opencl", native_operators=False, compile=False, custom_op=True, kernel_families=True
)
class TestOpenCLFamilies:
    """A render with driver=opencl, the custom operator and the kernel families: their kernels'
    C++ tests (kernels_opencl_custom_ops*, kernels_opencl_families*) on one and two devices and as
    on a device without cl_khr_fp64, and the generated suite's tests of them on two PoCL devices."""

    answers = {
        "preset": "custom",
        "driver": "opencl",
        "native_operators": False,
        "compile": False,
        "custom_op": True,
        "kernel_families": True,
    }

    def test_the_kernel_tests_pass(self, render, tmp_path):
        require_opencl()
        root = render("foo", **self.answers)
        build = tmp_path / "runtime"
        configure = [checks.tool("cmake"), "-S", str(root), "-B", str(build), "-G", "Ninja", "-DRUNTIME_ONLY=ON"]
        targets = ["--target", "opencl_custom_ops_test", "--target", "opencl_families_test"]
        compile_tests = [checks.tool("cmake"), "--build", str(build), *targets]
        for command in (configure, compile_tests):
            result = subprocess.run(command, capture_output=True, text=True, timeout=900)
            assert result.returncode == 0, result.stdout + result.stderr
        ctest = [
            checks.tool("ctest"),
            "--test-dir",
            str(build),
            "--output-on-failure",
            "-R",
            "kernels_opencl_(custom_ops|families)",
        ]
        result = subprocess.run(ctest, capture_output=True, text=True, timeout=1800)
        assert result.returncode == 0, result.stdout + result.stderr
        for part in ("custom_ops", "families"):
            for suffix in ("", "_two_devices", "_no_fp64"):
                assert f"kernels_opencl_{part}{suffix} " in result.stdout, result.stdout

    def test_the_family_tests_pass_on_two_devices(self, render, monkeypatch):
        require_opencl()
        root = render("foo", **self.answers)
        project.build(root, jobs=2)
        monkeypatch.setenv("POCL_DEVICES", "pthread pthread")
        monkeypatch.setenv("FOO_OPENCL_DEVICES", "cpu")
        code = project.run_tests(root, "-m", "not slow", *FAMILY_TESTS)
        assert code == 0, project.failure_summary(root)
        # the whole of the dtype coverage, a slow file, which "not slow" leaves out
        code = project.run_tests(root, "tests/test_dtype_coverage.py")
        assert code == 0, project.failure_summary(root)
        code = project.run_tests(root, "-m", "not slow", "-k", RECURRENT, "tests/test_training.py")
        assert code == 0, project.failure_summary(root)

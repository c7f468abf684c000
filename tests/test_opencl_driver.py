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

PACKAGES = "pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo libclblast-dev"


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


def test_an_opencl_render_has_every_feature_and_compiles_to_opencl_c(render):
    """Nothing is refused with driver=opencl: compile renders Inductor's OpenCL C code generator in
    place of the emulated device's C++ one (choice_paths)."""
    root = render("foo", driver="opencl")  # the full preset: every feature on
    inductor = root / "torch_foo" / "_inductor"
    assert (inductor / "opencl_scheduling.py").exists() and (inductor / "opencl_kernels.py").exists()
    assert not (inductor / "scheduling.py").exists() and not (inductor / "kernels.py").exists()
    assert '"OpenCLScheduling"' in (inductor / "__init__.py").read_text()
    assert "opencl_kernels" in (inductor / "wrapper.py").read_text()


def test_the_operator_librarys_float_erf_is_the_compiled_kernels_one(render):
    """bias_gelu's float erf (gelu_erf, csrc/kernels/opencl/custom_ops.cpp) is a copy of the compiled
    kernels' cl_erf (opencl_scheduling.py), one in C++ and one in Python: the same code, coefficient
    for coefficient, so the accuracy scripts/fit_erf.py measured holds for both."""
    import re

    root = render("foo", driver="opencl")

    def body(text: str, name: str) -> list[str]:
        start = text.index(f"float {name}(float x) {{")
        end = text.index("\n}", start)
        return re.sub(r"\s+", " ", text[text.index("{", start) + 1 : end]).split(";")

    library = (root / "csrc" / "kernels" / "opencl" / "custom_ops.cpp").read_text()
    compiled = (root / "torch_foo" / "_inductor" / "opencl_scheduling.py").read_text()
    assert body(library, "gelu_erf") == body(compiled, "cl_erf")
    assert "gelu_erf(z * SQRT_HALF)" in library and " erf(z * SQRT_HALF)" not in library


# The OpenCL kernels and C++ tests each feature with kernels adds to the OpenCL operator library.
FEATURE_KERNELS = {
    "native_operators": (
        "csrc/kernels/opencl/native.cpp",
        "csrc/kernels/opencl/blas.cpp",
        "tests/runtime/opencl_native_checks.h",
    ),
    "custom_op": ("csrc/kernels/opencl/custom_ops.cpp", "tests/runtime/opencl_custom_ops_test.cpp"),
    "kernel_families": (
        "csrc/kernels/opencl/attention.cpp",
        "csrc/kernels/opencl/histogram.cpp",
        "csrc/kernels/opencl/recurrent.cpp",
        "tests/runtime/opencl_families_test.cpp",
    ),
}


def test_an_opencl_render_has_the_kernels_of_the_features_it_asks_for_and_no_others(render):
    """Each feature with kernels: its OpenCL kernels and their checks in an OpenCL render with it,
    in neither an OpenCL render without it nor an emulated render with every feature; native.h (the
    operators' declarations) with native_operators, and never the emulated device's kernels."""
    answers = {"preset": "custom", "driver": "opencl", "compile": False}
    with_them = render("foo", **answers, **dict.fromkeys(FEATURE_KERNELS, True))
    without = render("bar", **answers, **dict.fromkeys(FEATURE_KERNELS, False))
    emulated = render("baz", preset="full")
    for feature, paths in FEATURE_KERNELS.items():
        for path in paths:
            assert (with_them / path).exists(), (feature, path)
            assert not (without / path).exists(), (feature, path)
            assert not (emulated / path).exists(), (feature, path)
    assert (with_them / "csrc" / "kernels" / "native.h").is_file()
    assert not (with_them / "csrc" / "kernels" / "emulated").exists()


def test_an_opencl_render_builds_the_whole_extension(render):
    """No stop in CMake: the operator library covers what a render the validator accepts compiles."""
    root = render("foo", preset="minimal", driver="opencl")
    assert "operator library for OpenCL" not in (root / "CMakeLists.txt").read_text()
    assert 'DRIVER = "opencl"' in (root / "tests" / "numerics.py").read_text()
    assert "EXACT_EVERYWHERE = False" in (root / "tests" / "numerics.py").read_text()


# The answers of the OpenCL variant that `make test` builds (TestOpenCLDriver: its driver and
# operator library alone under ctest; TestOpenCLBackend: the extension and its whole generated suite):
# every feature, compile included (Inductor's OpenCL C kernels; tests/test_compile.py is slow).
OPENCL_SUITE_ANSWERS = {"preset": "custom", "driver": "opencl"}

# The operator library's tests of each feature's kernels, which the render has (ctest runs each as
# kernels_opencl_<part>, _two_devices and _no_fp64).
OPENCL_KERNEL_PARTS = ("custom_ops", "families", "blas")


@pytest.mark.slow
@pytest.mark.backend("foo", **OPENCL_SUITE_ANSWERS)
class TestOpenCLDriver:
    """The driver and the operator library of the render with driver=opencl and every feature it
    allows, built alone, and their tests run by ctest on the default device and on two PoCL devices
    (contract_opencl, contract_opencl_two_devices, kernels_opencl, kernels_opencl_two_devices, and
    the same for each feature's kernels: OPENCL_KERNEL_PARTS), and the library's tests once more as on
    a device without cl_khr_fp64 (kernels_opencl_no_fp64, kernels_opencl_<part>_no_fp64), and the
    contract with graphs' command buffers off and required (contract_opencl_no_command_buffers,
    contract_opencl_command_buffers). With a
    cold PoCL kernel cache CLBlast's kernels take minutes to build (docs/opencl.md); warm, the whole
    run takes about two minutes."""

    def test_the_contract_and_the_kernels_pass_on_one_and_two_devices(self, render, tmp_path):
        require_opencl()
        root = render("foo", **OPENCL_SUITE_ANSWERS)
        build = tmp_path / "runtime"
        configure = [checks.tool("cmake"), "-S", str(root), "-B", str(build), "-G", "Ninja", "-DRUNTIME_ONLY=ON"]
        compile_tests = [checks.tool("cmake"), "--build", str(build), "--target", "runtime_tests"]
        for command in (configure, compile_tests):
            result = subprocess.run(command, capture_output=True, text=True, timeout=900)
            assert result.returncode == 0, result.stdout + result.stderr
        report = tmp_path / "ctest.xml"
        ctest = [checks.tool("ctest"), "--test-dir", str(build), "--output-on-failure", "--output-junit", str(report)]
        result = subprocess.run(ctest, capture_output=True, text=True, timeout=2400)
        assert result.returncode == 0, result.stdout + result.stderr
        outcomes = {
            case.get("name"): case.get("status") for case in ElementTree.parse(report).getroot().iter("testcase")
        }
        expected = {"contract_opencl", "contract_opencl_two_devices"}
        expected |= {"contract_opencl_no_command_buffers", "contract_opencl_command_buffers"}
        for part in ("", *(f"_{part}" for part in OPENCL_KERNEL_PARTS)):
            expected |= {f"kernels_opencl{part}{suffix}" for suffix in ("", "_two_devices", "_no_fp64")}
        expected.add("kernels_opencl_blas_clblast")  # products through CLBlast, not our kernels for CPU devices
        assert outcomes == dict.fromkeys(expected, "run"), outcomes


# What TestOpenCLBackend leaves out of the generated suite to keep `make test` within its budget,
# with why (times: a worker's, at load 14). Each runs elsewhere in `make test` or does not depend on the driver:
SUITE_EXCLUDED = [
    # The driver's conformance programs under ctest and run alone (80 s on a quiet machine, 490 s at
    # load 14): TestOpenCLDriver builds and runs the same programs, registered by the same
    # tests/runtime/CMakeLists.txt, on one and two devices.
    "tests/test_runtime.py",
    # An extension built under one torch and loaded under another, and import errors: the package's
    # loader (torch_foo/_version.py), the same Python on every driver (about 45 s of a worker's time:
    # each test starts interpreters that import torch).
    "tests/test_torch_version.py",
    # `import torch` loading the backend through its entry point, and warning when it cannot: the
    # package's Python and torch's autoload, the same on every driver (about 95 s of a worker's time).
    "tests/test_autoload.py",
    # The private torch API the package uses (torch_foo/_compat.py): the same Python on every driver
    # (about 70 s of a worker's time).
    "tests/test_compat.py",
]


@pytest.mark.slow
@pytest.mark.backend("foo", **OPENCL_SUITE_ANSWERS)
class TestOpenCLBackend:
    """The render with driver=opencl and every feature it allows (OPENCL_SUITE_ANSWERS) builds as a
    Python extension and passes the generated suite's not-slow tests, but SUITE_EXCLUDED, on two PoCL
    devices with two workers: the collectives over Gloo through pinned staging buffers, the profiler's
    device timeline, graphs and the fallback sweep's fast subset on the OpenCL driver (the OpInfo
    tests and distributed training are slow tests: docs/opencl.md has their run). What the suite
    skips there is the emulated device's own mechanisms (emulated_driver) and what PyTorch refuses.
    Then tests/test_compile.py (a slow file): torch.compile with Inductor emitting OpenCL C."""

    def test_the_suite_passes_on_two_devices(self, render, monkeypatch):
        require_opencl()
        root = render("foo", **OPENCL_SUITE_ANSWERS)
        project.build(root, jobs=2)
        monkeypatch.setenv("POCL_DEVICES", "pthread pthread")
        monkeypatch.setenv("FOO_OPENCL_DEVICES", "cpu")  # PoCL's, where a GPU would come first
        excluded = [f"--ignore={path}" for path in SUITE_EXCLUDED]
        code = project.run_tests(root, "-m", "not slow", "-n", "2", *excluded)
        assert code == 0, project.failure_summary(root)
        cases = list(ElementTree.parse(root / project.RESULTS_FILE).getroot().iter("testcase"))
        # The module of each test that ran (JUnit's classname: tests.<module>, or tests.<module>.<class>).
        ran = {case.get("classname", "").split(".")[1] for case in cases if case.find("skipped") is None}
        for module in (
            "test_multi_device",
            "test_distributed",
            "test_profiler",
            "test_graphs",
            "test_fallback_sweep",
            "test_blas",
            "test_softmax",
            "test_custom_ops",
            "test_attention",
        ):
            assert module in ran, f"no test of {module} ran"
        reasons = [skip.get("message", "") for case in cases for skip in case.iter("skipped")]
        assert not [reason for reason in reasons if "needs two foo devices" in reason], reasons
        # torch.compile's tests, slow on every driver (the example runs them on the emulated device):
        # here Inductor's OpenCL C kernels, about a minute with PoCL's kernel cache warm.
        code = project.run_tests(root, "tests/test_compile.py", "-n", "2")
        assert code == 0, project.failure_summary(root)
        cases = list(ElementTree.parse(root / project.RESULTS_FILE).getroot().iter("testcase"))
        passed = [case for case in cases if case.find("skipped") is None and case.find("failure") is None]
        assert len(passed) >= 30, f"only {len(passed)} compile tests ran on OpenCL"

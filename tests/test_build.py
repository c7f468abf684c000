"""Rendered projects build against the installed torch and pass their own test suites.

The checked-in example is built exactly as committed; two other names are rendered fresh,
one of them with an underscore and non-default answers. The generated torch.compile tests take
minutes per run, so they run for the example and for my_accel (an underscore in every derived name,
three devices), not for npu nor the feature variants (test_variants.py), whose differences do not
reach the compiler integration."""

import shutil

import pytest

import checks
import project


@pytest.mark.slow
@pytest.mark.backend("foo")
def test_checked_in_example_builds_and_passes(tmp_path, builds):
    copy = tmp_path / "foo"
    shutil.copytree(project.EXAMPLE, copy, ignore=shutil.ignore_patterns(*project.BUILD_ARTIFACTS, "*.so"))
    passed, _ = builds.build_and_test(copy, "example_generated", compile_tests=True)
    assert passed, "the test suite of example_generated failed"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,answers,compile_tests",
    [
        pytest.param("npu", {}, False, marks=pytest.mark.backend("npu")),
        pytest.param("my_accel", {"device_count": 3}, True, marks=pytest.mark.backend("my_accel")),
    ],
)
def test_other_names_build_and_pass(render, builds, name, answers, compile_tests):
    passed, _ = builds.build_and_test(render(name, **answers), name, compile_tests=compile_tests)
    assert passed, f"the test suite of {name} failed"


def test_the_compile_tests_the_builds_leave_out_are_exactly_the_marked_ones(render):
    """Runs without compile_tests pass `-m "not compile"`: the marker must be registered in the
    generated project (an unknown marker only warns) and set on tests/test_compile.py alone."""
    root = render("foo")
    markers = checks.tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(marker.startswith("compile:") for marker in markers)
    marked = sorted(p.name for p in (root / "tests").glob("*.py") if "pytest.mark.compile" in p.read_text())
    assert marked == ["test_compile.py"]
    assert "pytestmark = pytest.mark.compile" in (root / "tests" / "test_compile.py").read_text()

"""Rendered projects build against the installed torch and pass their own test suites.

The checked-in example is built exactly as committed; two other names are rendered fresh,
one of them with an underscore and non-default answers."""

import shutil

import pytest

import project


@pytest.mark.slow
@pytest.mark.backend("foo")
def test_checked_in_example_builds_and_passes(tmp_path, builds):
    copy = tmp_path / "foo"
    shutil.copytree(project.EXAMPLE, copy, ignore=shutil.ignore_patterns(*project.BUILD_ARTIFACTS, "*.so"))
    passed, _ = builds.build_and_test(copy, "example_generated")
    assert passed, "the test suite of example_generated failed"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,answers",
    [
        pytest.param("npu", {}, marks=pytest.mark.backend("npu")),
        pytest.param("my_accel", {"device_count": 3}, marks=pytest.mark.backend("my_accel")),
    ],
)
def test_other_names_build_and_pass(render, builds, name, answers):
    passed, _ = builds.build_and_test(render(name, **answers), name)
    assert passed, f"the test suite of {name} failed"

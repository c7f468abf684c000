"""Rendered projects build against the installed torch and pass their own test suites.

The checked-in example is built exactly as committed; two other names are rendered fresh,
one of them with an underscore and non-default answers."""

import shutil

import pytest

import project


def build_and_test(path):
    project.build(path, jobs=2)
    assert project.run_tests(path) == 0, f"the test suite of {path.name} failed"


@pytest.mark.slow
def test_checked_in_example_builds_and_passes(tmp_path):
    copy = tmp_path / "foo"
    shutil.copytree(project.EXAMPLE, copy, ignore=shutil.ignore_patterns(*project.BUILD_ARTIFACTS, "*.so"))
    build_and_test(copy)


@pytest.mark.slow
@pytest.mark.parametrize("name,answers", [("npu", {}), ("my_accel", {"device_count": 3})])
def test_other_names_build_and_pass(render, name, answers):
    build_and_test(render(name, **answers))

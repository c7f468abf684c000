"""Rendered projects build against the installed torch and pass their own test suites.

The checked-in example is built exactly as committed and runs its whole suite; another name, with an
underscore in every derived name and non-default answers, is rendered fresh and runs all but the
tests its suite marks slow (conftest.Builds). A plain name such as npu adds nothing to these two: a
name written into the template where an answer belongs shows in my_accel's build already."""

import shutil

import pytest

import checks
import project


@pytest.mark.slow
@pytest.mark.backend("foo")
def test_checked_in_example_builds_and_passes(tmp_path, builds):
    copy = tmp_path / "foo"
    shutil.copytree(project.EXAMPLE, copy, ignore=shutil.ignore_patterns(*project.BUILD_ARTIFACTS, "*.so"))
    passed, _ = builds.build_and_test(copy, "example_generated", slow_tests=True)
    assert passed, "the test suite of example_generated failed"


ANOTHER = {"device_count": 3}


@pytest.mark.slow
@pytest.mark.backend("my_accel", **ANOTHER)
def test_another_name_builds_and_passes(render, builds):
    passed, _ = builds.build_and_test(render("my_accel", **ANOTHER), "my_accel")
    assert passed, "the test suite of my_accel failed"


def test_slow_generated_tests_run_only_where_asked_and_once(monkeypatch, tmp_path):
    """Builds: a suite's slow tests run once, in the build that asks for them, and a later request for
    the same tests reuses what ran (the whole suite covers the fast part, and the other way round)."""
    from conftest import FAST, SLOW, WHOLE, Builds

    runs = []
    monkeypatch.setattr(project, "build", lambda path, jobs: runs.append((path.name, "build")))
    monkeypatch.setattr(project, "reuse_build", lambda built, path: built)
    monkeypatch.setattr(
        project, "run_tests", lambda path, *args, python=None: runs.append((path.name, " ".join(args))) or 0
    )
    monkeypatch.setattr(checks, "test_inputs_digest", lambda path: path.name[0])  # a, a2: same tests
    monkeypatch.setattr(checks, "test_only_inputs", lambda path: {"tests": path.name[0]})
    monkeypatch.setattr(checks, "build_inputs_digest", lambda path: "same build")
    builds = Builds()
    assert builds.build_and_test(tmp_path / "a", "a") == (True, "a")
    assert builds.build_and_test(tmp_path / "a2", "a2", slow_tests=True)[0]
    assert builds.build_and_test(tmp_path / "b", "b", slow_tests=True)[0]
    assert builds.build_and_test(tmp_path / "b2", "b2")[0] and builds.build_and_test(tmp_path / "b3", "b3")[0]
    assert runs == [("a", "build"), ("a", f"-m {FAST}"), ("a2", f"-m {SLOW}"), ("b", WHOLE)]


def test_the_tests_the_builds_leave_out_are_exactly_the_marked_ones(render):
    """Builds other than the example pass `-m "not slow"`: the marker must be registered in every
    generated project (an unknown marker only warns) and set on the files that take minutes alone."""
    for name, answers, expected in (
        (
            "foo",
            {},
            {
                "test_compile.py",
                "test_opinfo.py",
                "test_dtype_coverage.py",
                "test_fallback_sweep.py",
                "test_distributed_faults.py",
                "test_distributed_training.py",
                "test_distributed_init.py",
            },
        ),
        ("bar", {"opinfo_tests": False, "distributed": False}, {"test_compile.py"}),
    ):
        root = render(name, **answers)
        ini = checks.tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
        assert any(marker.startswith("slow:") for marker in ini["markers"])
        marked = {p.name for p in (root / "tests").glob("*.py") if "pytest.mark.slow" in p.read_text()}
        assert marked == expected


def test_a_render_with_some_of_the_tests_of_a_passed_run_on_its_build_is_covered(monkeypatch, tmp_path):
    """Builds: turning off a feature that only adds tests (benchmarks, OpInfo) leaves the other test
    files unchanged; their run on the same build has passed already, so none is repeated. A changed
    file, another build, or a run that failed still means a run of its own."""
    from conftest import FAST, Builds

    runs = []
    monkeypatch.setattr(project, "build", lambda path, jobs: runs.append((path.name, "build")))
    monkeypatch.setattr(project, "reuse_build", lambda built, path: built)
    monkeypatch.setattr(project, "run_tests", lambda path, *args, python=None: runs.append((path.name, args)) or 0)
    inputs = {
        "all": {"tests/a.py": "1", "tests/b.py": "2"},
        "fewer": {"tests/a.py": "1"},
        "changed": {"tests/a.py": "3"},
        "other": {"tests/a.py": "1"},
    }
    monkeypatch.setattr(checks, "test_only_inputs", lambda path: inputs[path.name])
    monkeypatch.setattr(checks, "test_inputs_digest", lambda path: path.name)
    monkeypatch.setattr(checks, "build_inputs_digest", lambda path: "second" if path.name == "other" else "first")
    builds = Builds()
    for name in ("all", "fewer", "changed", "other"):
        assert builds.build_and_test(tmp_path / name, name)[0]
    assert runs == [
        ("all", "build"),
        ("all", ("-m", FAST)),
        ("changed", ("-m", FAST)),
        ("other", "build"),
        ("other", ("-m", FAST)),
    ]

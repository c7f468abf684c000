"""Tests of the template itself: rendering, validation, the checked-in example, and building and
testing rendered projects (the `slow` ones)."""

import os
import re
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
# Tools installed next to this interpreter (ruff, clang-format, actionlint, mkdocs, ...) are found
# also when the environment is not activated (make runs .venv/bin/python directly).
os.environ["PATH"] = sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", "")

import checks  # noqa: E402
import project  # noqa: E402


def pytest_addoption(parser):
    parser.addoption(
        "--backend",
        action="append",
        default=[],
        metavar="NAME",
        help="run only the tests that build the device name NAME (marked backend(NAME)); repeatable. "
        "The template's CI runs one name per job: make test-build NAME=...",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: builds a rendered project and runs its test suite (minutes)")
    config.addinivalue_line(
        "markers",
        "backend(name, **answers): the device name (selected by --backend) and the other answers of the "
        "rendered project the test builds",
    )


def pytest_collection_modifyitems(config, items):
    """Every slow test says which device name it builds, so that `--backend` (and with it a CI job
    of .github/workflows/ci.yml) selects it; with `--backend NAME` only those tests run.

    The slow tests come first, so that in a parallel run (`make test`: pytest-xdist with
    --dist loadscope --no-loadscope-reorder, which hands out the classes and modules in this order)
    the builds start at once and the fast tests fill in at the end. The tests that share a build are
    one class of tests/test_build.py, which loadscope keeps in one worker, where Builds builds once."""
    unnamed = [
        item.nodeid for item in items if item.get_closest_marker("slow") and not item.get_closest_marker("backend")
    ]
    if unnamed:
        raise pytest.UsageError(
            "mark these slow tests with @pytest.mark.backend(name) so that a CI job builds them "
            f"(and add a new name to the build-test matrix of .github/workflows/ci.yml): {unnamed}"
        )
    names = config.getoption("backend")
    if names:
        chosen = [item for item in items if (mark := item.get_closest_marker("backend")) and mark.args[0] in names]
        config.hook.pytest_deselected(items=[item for item in items if item not in chosen])
        items[:] = chosen
    items.sort(key=lambda item: not item.get_closest_marker("slow"))


@pytest.fixture
def render(tmp_path):
    """render(name, **answers) -> path of a fresh project rendered from the working tree."""

    def _render(name: str = "foo", **answers) -> Path:
        return project.render(tmp_path / name, {"backend_name": name, **answers})

    return _render


class Builds:
    """Builds rendered projects and runs their test suites, each only once per set of inputs:
    renders whose compiled code and tests are identical (checks.test_inputs_digest) share one test
    run, and renders whose compiled code is identical (checks.build_inputs_digest) but whose tests
    differ share one build, each running its own tests against it (project.reuse_build).

    A generated suite's tests marked `slow` (multi-process training and fault injection of the
    distributed feature: minutes per run) run only where a test asks for them (the checked-in
    example); every other build runs the rest. They exercise the same C++ under every device name
    and feature choice, and the collectives themselves are tested in every build.

    A sanitized build (`sanitize`, SANITIZE's value: checks.sanitize of the variant) is a build of
    its own, never shared with a plain one, and its tests run under the sanitizers."""

    def __init__(self):
        self.built: dict[str, tuple[Path, str]] = {}  # build digest -> (built project, its label)
        # (test digest, marker expression: WHOLE, FAST or SLOW) -> (passed, what ran)
        self.results: dict[tuple[str, str], tuple[bool, str]] = {}
        # Runs that passed: (build digest, marker expression, test-only inputs, what ran)
        self.passed: list[tuple[str, str, dict[str, str], str]] = []
        # What ran -> the failed tests of its runs, with the end of each report (project.failure_summary)
        self.failures: dict[str, str] = {}

    def build_and_test(
        self, path: Path, label: str, slow_tests: bool = False, sanitize: str = ""
    ) -> tuple[bool | None, str]:
        """(passed, label of the build and test run) for the project at path; with slow_tests, its
        tests marked slow run too; with sanitize, built with those sanitizers and tested under them.
        A request for the fast tests of a render whose test files are some of those of a run that
        passed on the same build, unchanged (a feature that only adds tests, turned off), runs
        nothing: (None, which run had them) says so, and the caller reports the render's suite as
        not run (checks.test_only_inputs)."""
        tests = self._digest(checks.test_inputs_digest(path), sanitize)
        if not slow_tests and (tests, WHOLE) not in self.results and (tests, FAST) not in self.results:
            build, inputs = self._digest(checks.build_inputs_digest(path), sanitize), checks.test_only_inputs(path)
            for passed_build, part, passed_inputs, ran in self.passed:
                if passed_build == build and part in (WHOLE, FAST) and inputs.items() <= passed_inputs.items():
                    return None, f"{label}: its test files, unchanged, are among those of {ran}, which passed here"
        if (tests, WHOLE) in self.results:
            return self.results[(tests, WHOLE)]
        if not slow_tests:
            return self._result(path, label, tests, FAST, sanitize)
        if (tests, FAST) in self.results:  # only the slow tests are missing
            fast_passed, ran = self.results[(tests, FAST)]
            slow_passed, _ = self._result(path, label, tests, SLOW, sanitize)
            return fast_passed and slow_passed, ran
        return self._result(path, label, tests, WHOLE, sanitize)

    @staticmethod
    def _digest(digest: str, sanitize: str) -> str:
        """A build or test digest, told apart by the sanitizers of the build."""
        return f"{digest} sanitize={sanitize}" if sanitize else digest

    def python(self, path: Path, label: str) -> Path:
        """The interpreter of a build of the project at path, with its backend installed: the build of
        a project with the same build inputs if there is one, otherwise path built now. Its tests do not run."""
        build = checks.build_inputs_digest(path)
        if build not in self.built:
            project.build(path, jobs=2)
            self.built[build] = (path, label)
        return project.make_env(self.built[build][0])

    def _result(self, path: Path, label: str, tests: str, part: str, sanitize: str = "") -> tuple[bool, str]:
        if (tests, part) not in self.results:
            args = ["-m", part] if part != WHOLE else []
            ok = (0, 5) if part == SLOW else (0,)  # 5: no test selected, a project without slow tests
            build = self._digest(checks.build_inputs_digest(path), sanitize)
            if build in self.built:
                built, built_label = self.built[build]
                python = project.reuse_build(built, path)
                self.results[(tests, part)] = (
                    project.run_tests(path, *args, python=python, sanitize=sanitize) in ok,
                    f"{label} on the build of {built_label}",
                )
            else:
                project.build(path, jobs=2, sanitize=sanitize)
                self.built[build] = (path, label)
                ran = f"{label} (sanitized: {sanitize})" if sanitize else label
                self.results[(tests, part)] = (project.run_tests(path, *args, sanitize=sanitize) in ok, ran)
            passed, ran = self.results[(tests, part)]
            if passed:
                self.passed.append((build, part, checks.test_only_inputs(path), ran))
            elif summary := project.failure_summary(path):
                self.failures[ran] = (self.failures.get(ran, "") + "\n\n" + summary).strip()
        return self.results[(tests, part)]


# Which tests of a generated suite run (pytest -m): all of them, all but those marked slow, those.
WHOLE = ""
FAST = "not slow"
SLOW = "slow"


@pytest.fixture(scope="session")
def builds():
    return Builds()


def assert_builds_through_ccache(steps: list[dict], build_command: str) -> None:
    """The steps of a GitHub workflow job (the template's or a generated one) install ccache and restore
    its cache, keyed on the OS, the compiler and the Python and torch versions, before the step that
    runs build_command. The projects build with CMake, which runs `c++` from PATH: the masquerade
    directory /usr/lib/ccache puts ccache in front of it without changing CXX."""
    setup = next(i for i, step in enumerate(steps) if step.get("id") == "ccache")
    cache = next(i for i, step in enumerate(steps) if step.get("uses", "").startswith("actions/cache@"))
    build = next(i for i, step in enumerate(steps) if build_command in step.get("run", ""))
    assert setup < cache < build, "install ccache and restore its cache before the build"
    script = steps[setup]["run"]
    assert "apt-get install -y -q ccache" in script and '"/usr/lib/ccache" >> "$GITHUB_PATH"' in script
    assert "CXX" not in script
    key = re.search(r'echo "key=(\S+)" >> "\$GITHUB_OUTPUT"', script).group(1)
    assert all(part in key for part in ("$RUNNER_OS", "$compiler", "$versions")), key
    assert "torch.__version__" in script and "python_version()" in script and "c++ --version" in script
    assert steps[cache]["with"]["path"] == "~/.cache/ccache" and "CCACHE_DIR=$HOME/.cache/ccache" in script
    assert steps[cache]["with"]["key"] == "${{ steps.ccache.outputs.key }}-${{ github.sha }}"
    assert steps[cache]["with"]["restore-keys"] == "${{ steps.ccache.outputs.key }}-"
    assert "ccache --zero-stats" in steps[build]["run"], "show what the cache saved"

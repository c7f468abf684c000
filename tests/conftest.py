"""Tests of the template itself: rendering, validation, the checked-in example, and building and
testing rendered projects (the `slow` ones)."""

import os
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


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: builds a rendered project and runs its test suite (minutes)")


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
    differ share one build, each running its own tests against it (project.reuse_build)."""

    def __init__(self):
        self.built: dict[str, tuple[Path, str]] = {}  # build digest -> (built project, its label)
        self.results: dict[str, tuple[bool, str]] = {}  # test digest -> (passed, what ran)

    def build_and_test(self, path: Path, label: str) -> tuple[bool, str]:
        """(passed, label of the build and test run) for the project at path."""
        tests = checks.test_inputs_digest(path)
        if tests not in self.results:
            build = checks.build_inputs_digest(path)
            if build in self.built:
                built, built_label = self.built[build]
                python = project.reuse_build(built, path)
                self.results[tests] = (
                    project.run_tests(path, python=python) == 0,
                    f"{label} on the build of {built_label}",
                )
            else:
                project.build(path, jobs=2)
                self.built[build] = (path, label)
                self.results[tests] = (project.run_tests(path) == 0, label)
        return self.results[tests]


@pytest.fixture(scope="session")
def builds():
    return Builds()

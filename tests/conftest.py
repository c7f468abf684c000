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
import format_template  # noqa: E402,F401
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
    """Builds a rendered project and runs its test suite once per set of build inputs: renders whose
    compiled code and tests are identical (checks.build_inputs_digest) share one build."""

    def __init__(self):
        self.results: dict[str, tuple[bool, str]] = {}

    def build_and_test(self, path: Path, label: str) -> tuple[bool, str]:
        """(passed, label of the build that ran) for the project at path."""
        digest = checks.build_inputs_digest(path)
        if digest not in self.results:
            project.build(path, jobs=2)
            self.results[digest] = (project.run_tests(path) == 0, label)
        return self.results[digest]


@pytest.fixture(scope="session")
def builds():
    return Builds()

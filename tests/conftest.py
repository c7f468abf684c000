"""Tests of the template itself: rendering, validation, the checked-in example, and building and
testing rendered projects (the `slow` ones)."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

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

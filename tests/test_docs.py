"""The documentation site builds in strict mode (no broken link or anchor, no page missing from the
nav), covers what users need, and stays true to the template: every question is documented, and
every generated path a page names exists in the example."""

import re

import pytest
import yaml

import checks
import project
from conftest import ROOT

DOCS = ROOT / "docs"
INTEGRATION_POINTS = [
    "runtime",
    "errors",
    "devices",
    "allocator",
    "device-guard",
    "hooks",
    "kernel-launch",
    "factories-views-resize",
    "copies",
    "native-kernels",
    "cpu-fallback",
    "python-package",
    "autoload",
    "profiler",
    "memory-debugging",
    "benchmarks",
]
REQUIRED = [
    "index.md",
    "getting-started.md",
    "questions.md",
    "architecture.md",
    "porting.md",
    "troubleshooting.md",
    "updating.md",
    *(f"integration/{name}.md" for name in INTEGRATION_POINTS),
]


class _IgnoreTags(yaml.SafeLoader):
    """mkdocs.yml uses !!python/name tags; the nav does not."""


_IgnoreTags.add_multi_constructor("", lambda loader, suffix, node: None)


def nav_pages() -> list[str]:
    def walk(items):
        for item in items:
            if isinstance(item, str):
                yield item
            elif isinstance(item, dict):
                for value in item.values():
                    yield from walk(value) if isinstance(value, list) else [value]

    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_IgnoreTags)
    return list(walk(config["nav"]))


def test_site_builds_in_strict_mode(tmp_path):
    result = checks.build_docs(tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "integration" / "runtime" / "index.html").exists()


@pytest.mark.parametrize("page", REQUIRED)
def test_required_page_is_in_the_nav(page):
    assert (DOCS / page).is_file()
    assert page in nav_pages()


def test_architecture_has_a_diagram():
    assert "```mermaid" in (DOCS / "architecture.md").read_text()


def test_every_question_is_documented():
    questions = yaml.safe_load((ROOT / "copier.yml").read_text().replace("!include", "#"))
    asked = [name for name, spec in questions.items() if not name.startswith("_") and spec.get("when") is not False]
    table = (DOCS / "questions.md").read_text()
    missing = [name for name in asked if f"| `{name}` |" not in table]
    assert not missing, f"docs/questions.md has no row for {missing}"


def test_generated_paths_named_in_the_docs_exist():
    """Backticked paths such as `csrc/core/GuardImpl.cpp` or `torch_<name>/device.py` must exist in
    example_generated/ (for foo) or in this repository, so that pages follow files that move."""
    pattern = re.compile(r"`((?:csrc|tests|benchmarks|torch_<name>|_torch_<name>)[\w<>/.{},-]*\.(?:h|cpp|py))`")
    missing = []
    for page in DOCS.rglob("*.md"):
        for path in pattern.findall(page.read_text()):
            path = path.replace("<name>", "foo")
            if "{" in path:
                continue
            if not (project.EXAMPLE / path).exists() and not (ROOT / path).exists():  # or the template's own
                missing.append(f"{page.relative_to(DOCS)}: {path}")
    assert not missing, "\n".join(missing)

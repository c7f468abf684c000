"""example_generated/ is exactly what the template renders for backend_name=foo with default answers, and
reviews treat it as generated."""

import subprocess

import project


def test_example_equals_a_fresh_render():
    differences = project.example_differences()
    assert not differences, (
        "example_generated/ is out of date; run `make example` (python scripts/project.py example):\n"
        + "\n".join(differences[:20])
    )


def test_generated_files_are_marked_as_generated_for_reviews():
    """.gitattributes marks example_generated/ (and the rendered diagrams) linguist-generated, so a
    review shows a template change once, in template/, and collapses its rendering."""
    paths = [
        "example_generated/README.md",
        "example_generated/csrc/runtime/runtime.h",
        "docs/diagrams/architecture.svg",
    ]
    result = subprocess.run(
        ["git", "check-attr", "linguist-generated", *paths], cwd=project.ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": linguist-generated: true") == len(paths), result.stdout
    source = subprocess.run(
        ["git", "check-attr", "linguist-generated", "template/README.md.jinja"], cwd=project.ROOT, capture_output=True
    )
    assert b": linguist-generated: unspecified" in source.stdout

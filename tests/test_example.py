"""example_generated/ is exactly what the template renders for backend_name=foo with default answers."""

import project


def test_example_equals_a_fresh_render():
    differences = project.example_differences()
    assert not differences, (
        "example_generated/ is out of date; run `make example` (python scripts/project.py example):\n"
        + "\n".join(differences[:20])
    )

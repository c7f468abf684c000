"""A fresh render passes the generated project's own formatters and linter unchanged
(clang-format with its .clang-format, ruff format and ruff check with its pyproject settings)."""

import format_template


def test_renders_are_formatted_and_lint_clean():
    problems = format_template.check_names(format_template.CHECK_NAMES)
    assert not problems, "run python scripts/format_template.py:\n" + "\n".join(problems[:30])

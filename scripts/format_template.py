"""Format the template's C++ and Python files with the generated project's own formatters.

Formatters cannot read Jinja, so this renders the template with a marker device name whose
derived names are all distinct (zq_xv -> torch_zq_xv, ZqXv, ZQ_XV, zqXv), formats the rendered
files with clang-format and ruff (using template/.clang-format and template/pyproject.toml's ruff
settings), and writes each changed line back into the .jinja source with the marker names
turned back into Jinja expressions. Lines that contain Jinja control blocks are never touched.

    python scripts/format_template.py           rewrite template files in place
    python scripts/format_template.py --check   check that renders for several names are formatted

Formatting that fits one name can break for another (a line near the column limit grows with
the name), so the check renders foo and my_accel as well; lines it reports must be shortened by
hand.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import project  # noqa: E402

TEMPLATE = project.ROOT / "template"
MARKER = {"backend_name": "zq_xv"}
# Rendered text -> Jinja expression, longest first so that prefixes do not shadow each other.
UNRENDER_CPP = [
    ("torch_zq_xv", "{{ cpp_namespace }}"),
    ("torch-zq-xv", "{{ dist_name }}"),
    ("ZQ_XV", "{{ macro_prefix }}"),
    ("ZqXv", "{{ class_prefix }}"),
    ("zqXv", "{{ runtime_prefix }}"),
    ("zq_xv", "{{ backend_name }}"),
]
UNRENDER_PY = [("torch_zq_xv", "{{ package_name }}"), *UNRENDER_CPP[1:]]
CPP_SUFFIXES = (".cpp", ".h")


def tool(name: str) -> str:
    """Path of a formatter, preferring the one installed next to this interpreter (the venv's bin/,
    which is not on PATH when the venv is used without activating it)."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which(name, path=search)
    if found is None:
        raise SystemExit(f"{name} is not installed: pip install -r requirements-dev.txt")
    return found


def template_source(rendered: Path, root: Path) -> Path | None:
    """The template file that produced `rendered` (with or without .jinja)."""
    relative = rendered.relative_to(root)
    parts = ["{{package_name}}" if part == "torch_zq_xv" else part for part in relative.parts]
    parts[-1] = parts[-1].replace("_torch_zq_xv_", "_{{package_name}}_")
    candidate = TEMPLATE.joinpath(*parts)
    for path in (candidate.with_name(candidate.name + ".jinja"), candidate):
        if path.exists():
            return path
    return None


def unrender(line: str, table: list[tuple[str, str]]) -> str:
    for text, expression in table:
        line = line.replace(text, expression)
    return line


def merge(source: Path, before: list[str], after: list[str], table: list[tuple[str, str]]) -> str | None:
    """The template text with the formatter's changes applied, or None if unchanged."""
    template_lines = source.read_text().splitlines()
    if not source.name.endswith(".jinja"):
        return "\n".join(after) + "\n" if before != after else None
    if len(template_lines) != len(before) or any("{%" in line for line in template_lines):
        raise SystemExit(f"{source}: lines do not map one to one to its render; format it by hand")
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if op == "equal":
            out.extend(template_lines[i1:i2])
        else:
            out.extend(unrender(line, table) for line in after[j1:j2])
    return "\n".join(out) + "\n" if before != after else None


def format_render(root: Path) -> None:
    cpp = [str(p) for p in root.rglob("*") if p.suffix in CPP_SUFFIXES]
    if cpp:
        subprocess.run([tool("clang-format"), "-i", f"--style=file:{root / '.clang-format'}", *cpp], check=True)
    subprocess.run([tool("ruff"), "format", "--quiet", "."], cwd=root, check=True)
    subprocess.run([tool("ruff"), "check", "--quiet", "--fix-only", "--exit-zero", "."], cwd=root, check=True)


CHECK_NAMES = ["foo", "my_accel"]


def choice_answers() -> list[dict[str, str]]:
    """The answers that render the files of every choice between implementations (the driver): none
    (the defaults), then each other answer of each choice, with the features it refuses off."""
    import features

    answers: list[dict[str, object]] = [{}]
    by_name = features.by_name()
    for choice in features.load_choices():
        for answer in choice.choice_paths:
            if answer != choice.default:
                refused = choice.refuses.get(answer, {})
                answers.append({choice.name: answer, **{name: by_name[name].off_answer for name in refused}})
    return answers


def unformatted(root: Path) -> list[str]:
    """Formatter complaints about a render: empty when clang-format and ruff would change nothing."""
    problems = []
    cpp = [str(p) for p in root.rglob("*") if p.suffix in CPP_SUFFIXES]
    result = subprocess.run(
        [tool("clang-format"), "--dry-run", f"--style=file:{root / '.clang-format'}", *cpp],
        capture_output=True,
        text=True,
    )
    problems += [line for line in result.stderr.splitlines() if "warning:" in line or "error:" in line]
    for command in (
        [tool("ruff"), "format", "--check", "."],
        [tool("ruff"), "check", "--output-format", "concise", "."],
    ):
        result = subprocess.run(command, cwd=root, capture_output=True, text=True)
        if result.returncode != 0:
            problems += [line for line in result.stdout.splitlines() if line and not line.startswith("Found")]
    return problems


def check_names(names: list[str]) -> list[str]:
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for answers in choice_answers():
                label = "".join(f", {key}={value}" for key, value in answers.items())
                root = project.render(Path(tmp) / f"{name}{len(label)}", {"backend_name": name, **answers})
                problems += [f"[{name}{label}] {problem}" for problem in unformatted(root)]
    return problems


def format_sources(answers: dict) -> list[Path]:
    """Formats the template files of one render (`answers`); returns those it changed."""
    with tempfile.TemporaryDirectory() as tmp:
        rendered = project.render(Path(tmp) / "original", answers)
        formatted = Path(tmp) / "formatted"
        shutil.copytree(rendered, formatted)
        format_render(formatted)
        changed = []
        for path in sorted(formatted.rglob("*")):
            if not path.is_file() or path.suffix not in (*CPP_SUFFIXES, ".py"):
                continue
            before = (rendered / path.relative_to(formatted)).read_text().splitlines()
            after = path.read_text().splitlines()
            if before == after:
                continue
            source = template_source(rendered / path.relative_to(formatted), rendered)
            if source is None:
                raise SystemExit(f"no template file for {path.relative_to(formatted)}")
            text = merge(source, before, after, UNRENDER_CPP if path.suffix in CPP_SUFFIXES else UNRENDER_PY)
            if text is not None:
                changed.append(source.relative_to(project.ROOT))
                source.write_text(text)
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        problems = check_names(CHECK_NAMES)
        print("\n".join(problems) or f"renders for {', '.join(CHECK_NAMES)} are formatted")
        return 1 if problems else 0
    changed = []
    for answers in choice_answers():
        changed += [path for path in format_sources({**MARKER, **answers}) if path not in changed]
    for path in changed:
        print(f"reformatted {path}")
    problems = check_names(CHECK_NAMES)
    if problems:
        print("still unformatted for some names (shorten these lines by hand):\n" + "\n".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

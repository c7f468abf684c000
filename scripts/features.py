"""The feature choices of the template, from their one source, copier/features.yml.

    python scripts/features.py --check    fail (exit 1) when a generated part is stale, naming it
    python scripts/features.py --write    regenerate them from copier/features.yml

copier reads copier/features.yml itself (the value `features` of copier.yml) where Jinja can compute
from it: the preset's default, the answers file, the test requirements. What copier cannot compute
from data is generated here, between BEGIN and END markers: the feature questions and the feature
paths of `_exclude` in copier.yml, and the rows of the questions table of the docs
(docs/snippets/features.md, included by docs/questions.md). scripts/checks.py and the tests read the
list through `load()`.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "copier" / "features.yml"
COPIER_YML = ROOT / "copier.yml"
DOCS_SNIPPET = ROOT / "docs" / "snippets" / "features.md"
PRESETS = ("full", "minimal")
KEYS = {"name", "type", "choices", "defaults", "off_answer", "help", "docs", "compiles", "off_group"}
KEYS |= {"directory", "tests_require", "paths", "off_paths", "choice_paths", "asked"}
REQUIRED = {"name", "type", "defaults", "off_answer", "help", "docs", "compiles", "paths"}
# An entry with choice_paths is a choice between implementations (the driver), not a feature that
# is on or off: each answer has its own paths, which the other answers' renders lack; `refuses`
# names, per answer, the features it cannot render with yet, with why (the question's validator).
CHOICE_KEYS = {"name", "type", "choices", "defaults", "help", "docs", "compiles", "choice_paths", "asked", "refuses"}
CHOICE_REQUIRED = CHOICE_KEYS - {"asked", "refuses"}

# The markers around a generated part: edit copier/features.yml, not what is between them.
BEGIN = "# BEGIN generated from copier/features.yml by `python scripts/features.py --write`: {part}.\n"
END = "# END generated: {part}.\n"


@dataclass(frozen=True)
class Feature:
    name: str
    type: str
    defaults: dict[str, object]
    off_answer: object
    help: str
    docs: str
    compiles: bool
    paths: tuple[str, ...]
    choices: dict[str, str] = field(default_factory=dict)
    off_group: str | None = None
    directory: str | None = None
    tests_require: tuple[str, ...] = ()
    off_paths: tuple[str, ...] = ()

    @property
    def on_answer(self) -> object:
        """The answer of the full preset, which the example renders: the feature on."""
        return self.defaults["full"]

    def exclude_condition(self) -> str:
        """The Jinja test under which `_exclude` drops the feature's paths. A yes/no feature tests
        `== false`, never `not`: `copier update` renders the project's old release with these
        excludes and the old answers, in which a question newer than that release is undefined, and
        `not` of an undefined answer is true (copier.yml, _exclude). A choice tests that the answer
        is not the one that includes the feature."""
        if self.type == "bool":
            return f"{self.name} == false"
        return f"{self.name} != {_jinja(self.on_answer)}"

    def include_condition(self) -> str:
        """The Jinja test under which `_exclude` drops the feature's off_paths (what a render without
        it has in its place): the answer is the one that includes the feature. `== true` is false of
        an undefined answer, so `copier update`'s render of an older release keeps such a file."""
        if self.type == "bool":
            return f"{self.name} == true"
        return f"{self.name} == {_jinja(self.on_answer)}"


@dataclass(frozen=True)
class Choice:
    """An entry with choice_paths: each answer renders its own paths (choice_paths[answer]) and
    none of the other answers'. `asked: false` keeps the question from being asked (the answer is
    still given with --data). `refuses[answer]`: the features (by name, each with why) that a render
    with that answer must have off."""

    name: str
    type: str
    choices: dict[str, str]
    defaults: dict[str, object]
    help: str
    docs: str
    compiles: bool
    choice_paths: dict[str, tuple[str, ...]]
    asked: bool = True
    refuses: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def default(self) -> object:
        return self.defaults["full"]

    def exclude_condition(self, answer: str) -> str:
        """The Jinja test under which `_exclude` drops the paths of `answer`: the answer is another
        one. An undefined answer (`copier update` rendering a release older than the question) counts
        as the default, whose paths such a release has."""
        return f"({self.name} | default({_jinja(self.default)})) != {_jinja(answer)}"


def _jinja(value: object) -> str:
    return json.dumps(value).replace('"', "'") if isinstance(value, str) else json.dumps(value)


def _check_choice(entry: dict, where: str) -> None:
    unknown, missing = set(entry) - CHOICE_KEYS, CHOICE_REQUIRED - set(entry)
    if unknown or missing:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
    if entry["type"] != "str":
        raise ValueError(f"{where}: a choice with choice_paths has type str")
    answers = set(entry["choices"].values())
    if set(entry["defaults"]) != set(PRESETS) or not set(entry["defaults"].values()) <= answers:
        raise ValueError(f"{where}: defaults gives an answer ({sorted(answers)}) of each preset, {', '.join(PRESETS)}")
    if set(entry["choice_paths"]) != answers or not all(entry["choice_paths"].values()):
        raise ValueError(f"{where}: choice_paths gives the paths of each answer ({sorted(answers)})")
    refuses = entry.get("refuses", {})
    if not isinstance(refuses, dict) or not set(refuses) <= answers:
        raise ValueError(f"{where}: refuses maps answers ({sorted(answers)}) to the features they refuse")
    for answer, features in refuses.items():
        if not isinstance(features, dict) or not all(isinstance(why, str) and why for why in features.values()):
            raise ValueError(f"{where}: refuses.{answer} maps each refused feature to why it is refused")


def _check_entry(entry: dict, index: int, path: Path) -> None:
    if not isinstance(entry, dict):
        raise ValueError(f"{path}, entry {index + 1}: an entry is a mapping of the keys {sorted(KEYS)}")
    where = f"{path}, entry {index + 1} ({entry.get('name', 'no name')})"
    if "choice_paths" in entry:
        _check_choice(entry, where)
        return
    unknown, missing = set(entry) - KEYS, REQUIRED - set(entry)
    if unknown or missing:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
    if entry["type"] not in ("bool", "str"):
        raise ValueError(f"{where}: type is bool or str, not {entry['type']!r}")
    if entry["type"] == "str" and not entry.get("choices"):
        raise ValueError(f"{where}: a str feature needs its choices")
    if set(entry["defaults"]) != set(PRESETS):
        raise ValueError(f"{where}: defaults gives the answer of each preset, {', '.join(PRESETS)}")
    answers = {True, False} if entry["type"] == "bool" else set(entry["choices"].values())
    for value in (*entry["defaults"].values(), entry["off_answer"]):
        if value not in answers:
            raise ValueError(f"{where}: {value!r} is not an answer of the question ({sorted(answers, key=str)})")
    if entry["off_answer"] == entry["defaults"]["full"]:
        raise ValueError(f"{where}: the full preset must include the feature (the example shows every feature)")
    if not entry["paths"]:
        raise ValueError(f"{where}: a feature owns files (paths), which turning it off removes")


def _entries(path: Path) -> list[dict]:
    entries = yaml.safe_load(path.read_text())
    if not isinstance(entries, list):
        raise ValueError(f"{path}: a list of features")
    for index, entry in enumerate(entries):
        _check_entry(entry, index, path)
    names = [entry["name"] for entry in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: a feature is listed twice: {sorted({n for n in names if names.count(n) > 1})}")
    for entry in entries:
        group = entry.get("off_group")
        first = next((other["name"] for other in entries if other.get("off_group") == group), None)
        if group is not None and group != first:
            raise ValueError(
                f"{path}, {entry['name']}: an off_group is named after its first feature ({first}), not {group!r}"
            )
    return entries


def load(path: Path | None = None) -> list[Feature]:
    """The features of copier/features.yml (or path) that are on or off, in the order of the
    questions, checked (the choices between implementations: load_choices)."""
    entries = [entry for entry in _entries(path or SOURCE) if "choice_paths" not in entry]
    return [
        Feature(
            **{
                **entry,
                "paths": tuple(entry["paths"]),
                "off_paths": tuple(entry.get("off_paths", ())),
                "tests_require": tuple(entry.get("tests_require", ())),
                "choices": dict(entry.get("choices", {})),
            }
        )
        for entry in entries
    ]


def load_choices(path: Path | None = None) -> list[Choice]:
    """The entries of copier/features.yml (or path) with choice_paths, checked."""
    source = path or SOURCE
    entries = _entries(source)
    compiled = {entry["name"] for entry in entries if "choice_paths" not in entry and entry["compiles"]}
    for entry in entries:
        for answer, refused in entry.get("refuses", {}).items():
            if not set(refused) <= compiled:
                raise ValueError(
                    f"{source}, {entry['name']}: refuses.{answer} names features with compiled code, "
                    f"not {sorted(set(refused) - compiled)}"
                )
    return [
        Choice(**{**entry, "choice_paths": {k: tuple(v) for k, v in entry["choice_paths"].items()}})
        for entry in entries
        if "choice_paths" in entry
    ]


def by_name(features: list[Feature] | None = None) -> dict[str, Feature]:
    return {feature.name: feature for feature in features or load()}


# What copier.yml gets.


def _folded(key: str, text: str, indent: int) -> str:
    lines = textwrap.wrap(text, 100 - indent - 2, break_on_hyphens=False, break_long_words=False)
    return f"{' ' * indent}{key}: >-\n" + "".join(f"{' ' * (indent + 2)}{line}\n" for line in lines)


def _default(feature: Feature) -> str:
    full, minimal = feature.defaults["full"], feature.defaults["minimal"]
    if full == minimal:
        return full if isinstance(full, str) else json.dumps(full)
    if (full, minimal) == (True, False):
        return "\"{{ preset != 'minimal' }}\""
    if (full, minimal) == (False, True):
        return "\"{{ preset == 'minimal' }}\""
    return f"\"{{{{ {_jinja(minimal)} if preset == 'minimal' else {_jinja(full)} }}}}\""


def questions_block(features: list[Feature], choices: list[Choice] = ()) -> str:
    """The feature questions: asked only for the preset custom, each defaulting to its preset's answer;
    then `feature_values`, every feature's answer by name (the answers file reads it: Jinja cannot
    look a variable up by a name it holds)."""
    text = ""
    for feature in features:
        text += f"{feature.name}:\n  type: {feature.type}\n  default: {_default(feature)}\n"
        text += "  when: \"{{ preset == 'custom' }}\"\n"
        text += _folded("help", feature.help, 2)
        if feature.choices:
            text += "  choices:\n" + "".join(f"    {json.dumps(k)}: {v}\n" for k, v in feature.choices.items())
        text += "\n"
    for choice in choices:
        text += f"{choice.name}:\n  type: {choice.type}\n  default: {_default(choice)}\n"
        text += "  when: \"{{ preset == 'custom' }}\"\n" if choice.asked else "  when: false\n"
        text += _folded("help", choice.help, 2)
        text += "  choices:\n" + "".join(f"    {json.dumps(k)}: {v}\n" for k, v in choice.choices.items())
        text += _refusal(choice)
        text += "\n"
    values = ",\n".join(f'      "{entry.name}": {{{{ {entry.name} | tojson }}}}' for entry in (*features, *choices))
    text += "# Every feature's answer, by name.\nfeature_values:\n  type: yaml\n  when: false\n"
    return text + "  default: |-\n    {\n" + values + "\n    }\n"


def _refusal(choice: Choice) -> str:
    """The validator of a choice with `refuses`: an answer with one of its refused features on fails,
    naming every such feature with why, and how to turn them off."""
    if not choice.refuses:
        return ""
    text = "  validator: >-\n    {%- set refused = namespace(names=[], why=[]) -%}\n"
    for answer, features in choice.refuses.items():
        for name, why in features.items():
            reason = " ".join(why.split()).replace('"', "'")
            text += (
                f"    {{%- if {choice.name} == {_jinja(answer)} and {name} != false -%}}"
                f"{{%- set refused.names = refused.names + ['{name}'] -%}}"
                f'{{%- set refused.why = refused.why + ["{name}: {reason}"] -%}}{{%- endif -%}}\n'
            )
    return text + (
        "    {%- if refused.names -%}\n"
        f"    {choice.name}={{{{ {choice.name} }}}} cannot render with {{{{ refused.names | join(', ') }}}} on"
        " ({{ refused.why | join('; ') }}). Turn them off ({% for name in refused.names %}--data {{ name }}=false"
        "{{ ' ' if not loop.last }}{% endfor %}) or choose the preset minimal.\n"
        "    {%- endif -%}\n"
    )


def exclude_block(features: list[Feature], choices: list[Choice] = ()) -> str:
    lines = []
    for choice in choices:
        for answer, paths in choice.choice_paths.items():
            lines += [f'  - "{{% if {choice.exclude_condition(answer)} %}}{path}{{% endif %}}"\n' for path in paths]
    for feature in features:
        lines += [f'  - "{{% if {feature.exclude_condition()} %}}{path}{{% endif %}}"\n' for path in feature.paths]
        lines += [f'  - "{{% if {feature.include_condition()} %}}{path}{{% endif %}}"\n' for path in feature.off_paths]
    return "".join(lines)


def docs_rows(features: list[Feature], choices: list[Choice] = ()) -> str:
    """The rows of the questions table (docs/questions.md) that describe the features."""

    def answer(value: object) -> str:
        if isinstance(value, bool):
            return "yes" if value else "no"
        return f"`{value}`"

    rows = "".join(f"| `{f.name}` | {answer(f.on_answer)} | {f.docs} |\n" for f in features)
    return rows + "".join(f"| `{c.name}` | {answer(c.default)} | {c.docs} |\n" for c in choices)


PARTS = (
    (COPIER_YML, "the feature questions", questions_block, ""),
    (COPIER_YML, "the paths of each feature", exclude_block, "  "),
)


def _replace(text: str, part: str, body: str, indent: str, path: Path) -> str:
    begin, end = indent + BEGIN.format(part=part), indent + END.format(part=part)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"{path.relative_to(ROOT)} has no markers for {part}: the lines\n{begin}...\n{end}")
    return text[: start + len(begin)] + body + text[stop:]


def generated() -> dict[Path, str]:
    """Each file with generated parts, as it should be."""
    features, choices = load(), load_choices()
    text = COPIER_YML.read_text()
    for path, part, make, indent in PARTS:
        text = _replace(text, part, make(features, choices), indent, path)
    # Rows only: a line of anything else would end the table that includes them.
    return {COPIER_YML: text, DOCS_SNIPPET: docs_rows(features, choices)}


def stale() -> list[str]:
    """The files whose generated parts differ from copier/features.yml."""
    return [
        str(path.relative_to(ROOT))
        for path, text in generated().items()
        if not path.exists() or path.read_text() != text
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="fail when a generated part is stale")
    action.add_argument("--write", action="store_true", help="regenerate the parts from copier/features.yml")
    args = parser.parse_args()
    if args.check:
        files = stale()
        if files:
            print(f"stale, run `python scripts/features.py --write`: {', '.join(files)}", file=sys.stderr)
            return 1
        print("the generated parts follow copier/features.yml")
        return 0
    for path, text in generated().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

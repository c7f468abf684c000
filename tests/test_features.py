"""copier/features.yml, the one list of the feature choices: the parts generated from it
(scripts/features.py: copier.yml's feature questions and `_exclude` lines, the docs' table) are
current, and a malformed entry is refused with a message that names it."""

import subprocess
import sys

import pytest
import yaml

import features
from conftest import ROOT


def test_the_generated_parts_follow_the_list():
    assert not features.stale(), "run `python scripts/features.py --write` and commit what it changes"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "features.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_a_stale_part_is_found_and_written(tmp_path, monkeypatch):
    """Editing the list without regenerating fails the check, naming the file; --write mends it."""
    source = tmp_path / "features.yml"
    entries = yaml.safe_load(features.SOURCE.read_text())
    entries[0]["help"] += " (edited)"
    entries[0]["paths"].append("tests/test_added_by_this_test.py")
    source.write_text(yaml.safe_dump(entries))
    copier_yml, snippet = tmp_path / "copier.yml", tmp_path / "features.md"
    copier_yml.write_text(features.COPIER_YML.read_text())
    snippet.write_text(features.DOCS_SNIPPET.read_text())
    monkeypatch.setattr(features, "SOURCE", source)
    monkeypatch.setattr(features, "ROOT", tmp_path)
    monkeypatch.setattr(features, "COPIER_YML", copier_yml)
    monkeypatch.setattr(features, "DOCS_SNIPPET", snippet)
    monkeypatch.setattr(features, "PARTS", [(copier_yml, *part[1:]) for part in features.PARTS])
    assert features.stale() == ["copier.yml"]
    for path, text in features.generated().items():
        path.write_text(text)
    assert not features.stale()
    assert "(edited)" in copier_yml.read_text()
    name = entries[0]["name"]
    assert f'"{{% if {name} == false %}}tests/test_added_by_this_test.py{{% endif %}}"' in copier_yml.read_text()
    questions = yaml.safe_load(copier_yml.read_text().replace("!include", "#"))
    assert questions[name]["help"].endswith("(edited)")
    # The rest of copier.yml is left as it was.
    outside = features.COPIER_YML.read_text().split("# BEGIN generated")[0]
    assert copier_yml.read_text().startswith(outside)


def test_the_docs_table_includes_the_generated_rows():
    """docs/questions.md includes the rows (its table states no feature of its own)."""
    page = (ROOT / "docs" / "questions.md").read_text()
    assert '--8<-- "docs/snippets/features.md"' in page
    for feature in features.load():
        assert f"| `{feature.name}` |" not in page, f"{feature.name}: its row comes from copier/features.yml"
        assert f"| `{feature.name}` |" in features.DOCS_SNIPPET.read_text()


def test_the_copier_render_reads_the_list(tmp_path):
    """The preset's default and the answers file iterate the list: a feature given off with --data
    makes the preset custom, and the answers file records every feature of the list."""
    import project

    feature = features.load()[0]
    root = project.render(tmp_path / "p", {"backend_name": "foo", feature.name: feature.off_answer})
    answers = yaml.safe_load((root / ".copier-answers.yml").read_text())
    assert answers["preset"] == "custom" and answers[feature.name] == feature.off_answer
    assert {feature.name for feature in features.load()} <= set(answers)
    assert "features" not in answers and "feature_values" not in answers and "tests_require" not in answers


ENTRY = {
    "name": "example",
    "type": "bool",
    "defaults": {"full": True, "minimal": False},
    "off_answer": False,
    "help": "Include the example",
    "docs": "include the example",
    "compiles": False,
    "paths": ["example"],
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, "unknown keys ['colour']"),
        ({"paths": None}, "missing keys ['paths']"),
        ({"type": "int"}, "type is bool or str, not 'int'"),
        ({"type": "str"}, "a str feature needs its choices"),
        ({"defaults": {"full": True}}, "defaults gives the answer of each preset, full, minimal"),
        ({"off_answer": "no"}, "'no' is not an answer of the question"),
        ({"off_answer": True}, "the full preset must include the feature"),
        ({"paths": []}, "a feature owns files (paths)"),
        ({"off_group": "nothing"}, "an off_group is named after its first feature (example), not 'nothing'"),
    ],
)
def test_a_malformed_entry_is_refused_with_its_name(tmp_path, change, message):
    entry = {key: value for key, value in {**ENTRY, **change}.items() if value is not None}
    path = tmp_path / "features.yml"
    path.write_text(yaml.safe_dump([entry]))
    with pytest.raises(ValueError, match="example") as error:
        features.load(path)
    assert message in str(error.value)


def test_a_feature_listed_twice_is_refused(tmp_path):
    path = tmp_path / "features.yml"
    path.write_text(yaml.safe_dump([ENTRY, ENTRY]))
    with pytest.raises(ValueError, match=r"a feature is listed twice: \['example'\]"):
        features.load(path)


CHOICE = {
    "name": "engine",
    "type": "str",
    "choices": {"First": "first", "Second": "second"},
    "defaults": {"full": "first", "minimal": "first"},
    "asked": False,
    "help": "Which engine",
    "docs": "the engine",
    "compiles": True,
    "choice_paths": {"first": ["engine/first"], "second": ["engine/second", "tests/test_second.py"]},
}


def test_a_choice_between_implementations_excludes_the_other_answers_paths():
    """An entry with choice_paths is not an on/off feature (load() leaves it out): each answer keeps
    its own paths and drops the others', an undefined answer (`copier update` of an older release)
    counting as the default; `asked: false` keeps the question from being asked."""
    (choice,) = [
        features.Choice(**{**CHOICE, "choice_paths": {k: tuple(v) for k, v in CHOICE["choice_paths"].items()}})
    ]
    excludes = features.exclude_block([], [choice])
    assert "\"{% if (engine | default('first')) != 'first' %}engine/first{% endif %}\"" in excludes
    assert "\"{% if (engine | default('first')) != 'second' %}tests/test_second.py{% endif %}\"" in excludes
    questions = yaml.safe_load(features.questions_block([], [choice]))
    assert questions["engine"]["when"] is False and questions["engine"]["default"] == "first"
    assert questions["engine"]["choices"] == {"First": "first", "Second": "second"}
    assert "driver" in {c.name for c in features.load_choices()}
    assert "driver" not in {f.name for f in features.load()}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type": "bool"}, "a choice with choice_paths has type str"),
        ({"defaults": {"full": "third", "minimal": "first"}}, "defaults gives an answer"),
        ({"choice_paths": {"first": ["engine/first"]}}, "choice_paths gives the paths of each answer"),
        ({"off_answer": "first"}, "unknown keys ['off_answer']"),
    ],
)
def test_a_malformed_choice_is_refused_with_its_name(tmp_path, change, message):
    path = tmp_path / "features.yml"
    path.write_text(yaml.safe_dump([{**CHOICE, **change}]))
    with pytest.raises(ValueError, match="engine") as error:
        features.load_choices(path)
    assert message in str(error.value)

"""Feature choices: every class of combination (everything, minimal, each option off alone) renders
what it promises, passes the generated project's formatters and linters, and builds and passes its
own test suite. Variants whose compiled code and tests are identical share one build (see
checks.build_inputs_digest); a feature that changes C++ or tests gets its own build automatically."""

import pytest
import yaml

import checks
import format_template
import project
from conftest import ROOT

VARIANTS = checks.variants()


def features(answers: dict) -> dict:
    return {"benchmarks": answers.get("benchmarks", True), "ci": answers.get("ci", "github")}


@pytest.mark.parametrize("label", VARIANTS)
def test_variant_renders_what_it_promises(render, label):
    root = render("foo", **VARIANTS[label])
    want = features(VARIANTS[label])
    readme = (root / "README.md").read_text()
    assert (root / "benchmarks" / "bench_ops.py").exists() == want["benchmarks"]
    assert (root / "benchmarks" / "common.py").exists() == want["benchmarks"]
    assert ("`benchmarks/bench_ops.py`" in readme) == want["benchmarks"]
    workflow = root / ".github" / "workflows" / "ci.yml"
    assert workflow.exists() == (want["ci"] == "github")
    assert (".github/workflows/ci.yml" in readme) == (want["ci"] == "github")
    assert not (root / ".github").exists() or want["ci"] == "github"
    if workflow.exists():
        assert ("benchmarks/bench_ops.py" in workflow.read_text()) == want["benchmarks"]
        assert not checks.actionlint_problems(root)
    assert (root / ".pre-commit-config.yaml").exists()
    answers = yaml.safe_load((root / ".copier-answers.yml").read_text())
    assert {k: answers[k] for k in want} == want, "the choices must be recorded for copier update"
    assert not format_template.unformatted(root)


def test_defaults_turn_every_feature_on():
    questions = yaml.safe_load((ROOT / "copier.yml").read_text().replace("!include", "#"))
    for name, off in checks.FEATURES_OFF.items():
        assert questions[name]["default"] != off, f"{name} must default to on: the example shows every feature"
    example = project.EXAMPLE
    assert (example / "benchmarks").is_dir() and (example / ".github" / "workflows" / "ci.yml").is_file()


def test_every_yes_no_question_is_a_covered_feature():
    questions = yaml.safe_load((ROOT / "copier.yml").read_text().replace("!include", "#"))
    booleans = {name for name, q in questions.items() if isinstance(q, dict) and q.get("type") == "bool"}
    missing = booleans - set(checks.FEATURES_OFF)
    assert not missing, f"add {sorted(missing)} to FEATURES_OFF in scripts/checks.py so that the variants cover them"


def test_shared_builds_are_decided_by_content(tmp_path):
    """The build digest ignores only what builds and tests never read."""

    def digest(label, **answers):
        return checks.build_inputs_digest(project.render(tmp_path / label, {"backend_name": "foo", **answers}))

    everything = digest("everything")
    assert digest("minimal", benchmarks=False, ci="none") == everything
    assert digest("three-devices", device_count=3) != everything
    assert digest("npu", backend_name="npu") != everything


@pytest.mark.slow
@pytest.mark.parametrize("label", VARIANTS)
def test_variant_builds_and_passes(render, builds, label):
    passed, built_as = builds.build_and_test(render("foo", **VARIANTS[label]), label)
    assert passed, f"the test suite of variant {label!r} (built as {built_as!r}) failed"

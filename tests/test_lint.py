"""The template's own code passes ruff; the template's CI workflow and the generated project's pass
actionlint (with shellcheck on their scripts); the generated workflow builds through a compiler cache;
the generated pre-commit configuration is valid and pins the formatter versions that
tests/test_format.py runs."""

import re
import subprocess

import yaml

import checks
from conftest import assert_builds_through_ccache


def test_template_code_passes_ruff():
    problems = checks.ruff_problems()
    assert not problems, "run `ruff check --fix . && ruff format .`:\n" + "\n".join(problems[:30])


def test_ci_workflows_pass_actionlint():
    """.github/workflows/ci.yml of this repository and the generated workflow of every variant."""
    problems = checks.workflow_problems()
    assert not problems, "\n".join(problems)


def test_actionlint_reports_a_broken_workflow(render):
    root = render("foo")
    workflow = root / ".github" / "workflows" / "ci.yml"
    text = workflow.read_text()
    workflow.write_text(text.replace("python-version: ", "python-versoin: ", 1).replace("runs-on:", "run-on:", 1))
    problems = "\n".join(checks.actionlint_problems(root))
    assert "python-versoin" in problems and "run-on" in problems


def test_workflow_builds_without_isolation_against_cpu_torch(render):
    workflow = yaml.safe_load((render("foo") / ".github" / "workflows" / "ci.yml").read_text())
    assert workflow["env"]["TORCH_INDEX_URL"].endswith("/whl/cpu")
    assert set(workflow["jobs"]) == {"lint", "build-test", "nightly", "sanitizers"}
    steps = " ".join(step.get("run", "") for step in workflow["jobs"]["build-test"]["steps"])
    assert '"$TORCH_SPEC" --index-url "$TORCH_INDEX_URL"' in steps
    assert "pip install --no-build-isolation -e ." in steps and "pytest" in steps
    assert "pre-commit run --all-files" in workflow["jobs"]["lint"]["steps"][-1]["run"]


def test_workflow_tries_the_torch_nightly_without_failing_the_run(render):
    workflow = yaml.safe_load((render("foo") / ".github" / "workflows" / "ci.yml").read_text())
    nightly = workflow["jobs"]["nightly"]
    assert nightly["continue-on-error"] is True, "the nightly may break: it warns, it does not fail the run"
    steps = " ".join(step.get("run", "") for step in nightly["steps"])
    assert "--pre torch --index-url https://download.pytorch.org/whl/nightly/cpu" in steps
    assert "pip install --no-build-isolation -e ." in steps and "pytest" in steps
    assert workflow[True]["schedule"], "a nightly changes without a commit here: run on a schedule too"


def test_generated_workflow_runs_the_suite_under_asan_ubsan_and_tsan(render):
    """The sanitizers job builds with SANITIZE (tests/sanitizers/harness.py test: pip install --no-build-isolation,
    then pytest with the sanitizer runtime preloaded) for ASan+UBSan and for TSan."""
    job = yaml.safe_load((render("foo") / ".github" / "workflows" / "ci.yml").read_text())["jobs"]["sanitizers"]
    assert {entry["sanitize"] for entry in job["strategy"]["matrix"]["include"]} == {"address,undefined", "thread"}
    assert job["env"]["SANITIZE"] == "${{ matrix.sanitize }}"
    assert any(step.get("run", "").startswith("python tests/sanitizers/harness.py test ") for step in job["steps"])


def test_generated_workflow_builds_through_ccache_keyed_on_torch_and_compiler(render):
    workflow = yaml.safe_load((render("foo") / ".github" / "workflows" / "ci.yml").read_text())
    assert_builds_through_ccache(workflow["jobs"]["build-test"]["steps"], "pip install --no-build-isolation")


def tool_version(name: str) -> str:
    output = subprocess.run([checks.tool(name), "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"(\d+\.\d+\.\d+)", output).group(1)


def test_pre_commit_config_is_valid_and_pins_the_tested_formatters(render):
    root = render("foo")
    config = root / ".pre-commit-config.yaml"
    subprocess.run([checks.tool("pre-commit"), "validate-config", str(config)], check=True, capture_output=True)
    repos = {repo["repo"].rsplit("/", 1)[-1]: repo for repo in yaml.safe_load(config.read_text())["repos"]}
    assert repos["ruff-pre-commit"]["rev"] == f"v{tool_version('ruff')}"
    assert repos["mirrors-clang-format"]["rev"] == f"v{tool_version('clang-format')}"
    hooks = {hook["id"] for repo in repos.values() for hook in repo["hooks"]}
    assert hooks == {"ruff-check", "ruff-format", "clang-format"}

"""The template's own CI (.github/workflows/ci.yml) runs what `make test` runs: its parallel jobs call
Makefile targets that together select every test, the build matrix covers every device name the
slow tests build with both torch versions, and the builds keep a compiler cache. actionlint checks
the workflow in tests/test_lint.py; GitHub itself is not reachable from the test suite."""

import itertools
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

import facts
from conftest import ROOT, assert_builds_through_ccache

WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def combinations(job: dict) -> list[dict]:
    """The matrix values of each run of a job ([{}] without a matrix)."""
    matrix = job.get("strategy", {}).get("matrix", {})
    axes = {key: values for key, values in matrix.items() if key not in ("include", "exclude")}
    assert "include" not in matrix and "exclude" not in matrix, "extend combinations() for include/exclude"
    return [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]


def substitute(text: str, matrix: dict) -> str:
    return re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: str(matrix[m.group(1)]), text)


def make_targets(job: dict, matrix: dict) -> list[list[str]]:
    """The `make test...` command lines that a run of the job executes, with its environment expanded."""
    env = {k: substitute(str(v), matrix) for k, v in {**workflow().get("env", {}), **job.get("env", {})}.items()}
    commands = []
    for step in job["steps"]:
        for line in substitute(step.get("run", ""), matrix).splitlines():
            words = shlex.split(line)
            if words[:1] == ["make"] and any(word.startswith("test") for word in words[1:]):
                expanded = [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], word) for word in words[1:]]
                commands.append(expanded)
    return commands


def pytest_command(make_args: list[str]) -> list[str]:
    """The pytest command line that `make ARGS` runs (from `make -n`, without installing anything)."""
    printed = subprocess.run(
        ["make", "-n", "--no-print-directory", *make_args, "STAMP="],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    lines = [shlex.split(line) for line in printed.splitlines() if " -m pytest " in line]
    assert len(lines) == 1, f"make {' '.join(make_args)} should run pytest once:\n{printed}"
    return [sys.executable, *lines[0][1:]]


# Collects the tests of several pytest command lines in one interpreter (one import of the test
# modules instead of one per command); prints one JSON list of test ids per command line.
COLLECT = """
import json, sys
import pytest

class Ids:
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]

found = []
for args in json.loads(sys.argv[1]):
    ids = Ids()
    code = pytest.main([*args, "--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[ids])
    found.append(ids.ids if code == 0 else f"pytest {args} exited with {code}")
print("COLLECTED " + json.dumps(found))
"""


def collected(commands: list[list[str]]) -> list[set[str]]:
    """The test ids that each pytest command line selects."""
    assert all(command[:3] == [sys.executable, "-m", "pytest"] for command in commands)
    result = subprocess.run(
        [sys.executable, "-c", COLLECT, json.dumps([command[3:] for command in commands])],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("COLLECTED ")]
    assert result.returncode == 0 and lines, result.stdout[-3000:] + result.stderr[-3000:]
    found = json.loads(lines[-1].removeprefix("COLLECTED "))
    errors = [ids for ids in found if isinstance(ids, str)]
    assert not errors, "\n".join(errors) + result.stdout[-3000:]
    return [set(ids) for ids in found]


def test_ci_jobs_together_run_every_test_of_make_test():
    runs: dict[tuple, list[tuple[str, ...]]] = {}  # (job, matrix values) -> the pytest commands it runs
    for name, job in workflow()["jobs"].items():
        for matrix in combinations(job):
            commands = [tuple(pytest_command(make_args)) for make_args in make_targets(job, matrix)]
            assert commands, f"job {name} {matrix} runs no test"
            runs[name, tuple(sorted(matrix.items()))] = commands
    make_test = pytest_command(["test"])
    distinct = sorted({command for commands in runs.values() for command in commands})
    everything, slow, *selected = collected([make_test, [*make_test, "-m", "slow"], *map(list, distinct)])
    tests = {run: set().union(*(selected[distinct.index(c)] for c in commands)) for run, commands in runs.items()}
    assert len(slow) > 5 and slow < everything
    missing = everything - set().union(*tests.values())
    assert not missing, f"no CI job runs {sorted(missing)}"
    # The fast tests run once; every torch of the build matrix builds every name.
    assert sum(len(ids - slow) for ids in tests.values()) == len(everything - slow), "a fast test runs in two jobs"
    for torch in workflow()["jobs"]["build-test"]["strategy"]["matrix"]["torch"]:
        built = set().union(*(ids for (job, matrix), ids in tests.items() if ("torch", torch) in matrix))
        assert built == slow, f"with {torch}, no job runs {sorted(slow - built)}"


def test_build_matrix_covers_every_supported_release_and_tries_the_newest_cpu_release():
    makefile = (ROOT / "Makefile").read_text()
    pinned = subprocess.run(
        ["make", "-s", "--no-print-directory", "torch-spec"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    assert pinned == facts.torch_spec(), "make uses the default release of copier/torch.yml"
    flow = workflow()
    job = flow["jobs"]["build-test"]
    others = [facts.torch_spec(release) for release in facts.other_torch_releases()]
    assert job["strategy"]["matrix"]["torch"] == [pinned, *others, "torch"]
    assert job["strategy"]["fail-fast"] is False
    assert job["env"]["TORCH_SPEC"] == "${{ matrix.torch }}"
    assert flow["env"]["TORCH_INDEX_URL"] == CPU_INDEX, "PyPI's Linux torch is a CUDA build of several GB"
    assert '--index-url "$(TORCH_INDEX_URL)"' in makefile
    # YAML 1.1 reads the key `on` as true.
    assert flow[True]["schedule"], "a new torch is released without a commit here: run on a schedule too"


def test_builds_keep_a_compiler_cache_keyed_on_os_compiler_and_torch():
    assert_builds_through_ccache(workflow()["jobs"]["build-test"]["steps"], "make test-build")


def test_actions_are_pinned_by_version(render):
    for path in (WORKFLOW, render("foo") / ".github" / "workflows" / "ci.yml"):
        jobs = yaml.safe_load(path.read_text())["jobs"].values()
        uses = [step["uses"] for job in jobs for step in job["steps"] if "uses" in step]
        assert uses and all(re.fullmatch(r"[\w-]+/[\w-]+@v\d+(\.\d+)*", use) for use in uses), uses


# A suite whose slow tests record which process ran them, under the build they stand for: one class per
# build, as in tests/test_build.py.
PARALLEL_PROBE = """
import os
from pathlib import Path

import pytest

def record(group):
    Path(os.environ["PROBE_OUT"], f"{os.getpid()}-{os.urandom(4).hex()}").write_text(group)

@pytest.mark.slow
@pytest.mark.backend("foo")
class TestFoo:
    def test_example(self):
        record("foo")

    @pytest.mark.parametrize("answers", [{}, {"benchmarks": False}, {"ci": "none"}])
    def test_variant(self, answers):
        record("foo")

@pytest.mark.slow
@pytest.mark.backend("foo", custom_op=False)
class TestFooWithoutCustomOp:
    @pytest.mark.parametrize("answers", [{"custom_op": False}, {"custom_op": False, "ci": "none"}])
    def test_variant(self, answers):
        record("foo+custom_op=False")

@pytest.mark.slow
@pytest.mark.backend("bar")
class TestBar:
    def test_other_name(self):
        record("bar")

@pytest.mark.parametrize("n", range(6))
def test_fast(n):
    pass
"""


def test_parallel_runs_keep_the_tests_of_one_build_in_one_process(tmp_path):
    """`make test` runs pytest-xdist with --dist loadscope, which keeps the tests of one class in one
    process; tests/test_build.py has a class per build, because conftest.Builds shares a build only
    within one process. Checked on a small suite with the Makefile's own options, so that a change of
    pytest or pytest-xdist that spreads a class over processes fails here."""
    suite = tmp_path / "suite"
    (suite / "out").mkdir(parents=True)
    # The hooks of tests/conftest.py, loaded under another module name than the probe's conftest.
    (suite / "conftest.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('template_conftest', {str(ROOT / 'tests' / 'conftest.py')!r})\n"
        "template = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(template)\n"
        "pytest_addoption = template.pytest_addoption\n"
        "pytest_configure = template.pytest_configure\n"
        "pytest_collection_modifyitems = template.pytest_collection_modifyitems\n"
    )
    (suite / "test_probe.py").write_text(PARALLEL_PROBE)
    options = [word for word in pytest_command(["test"])[3:] if word != "tests"]
    assert "-n" in options and "loadscope" in options, options
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "-p", "no:cacheprovider", "-q", str(suite)],
        cwd=suite,
        env={**os.environ, "PROBE_OUT": str(suite / "out")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    processes: dict[str, set[str]] = {}
    for path in (suite / "out").iterdir():
        processes.setdefault(path.read_text(), set()).add(path.name.split("-")[0])
    assert set(processes) == {"foo", "foo+custom_op=False", "bar"}
    assert all(len(pids) == 1 for pids in processes.values()), processes

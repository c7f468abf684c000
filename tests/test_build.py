"""Rendered projects build against the installed torch and pass their own test suites.

The checked-in example is built exactly as committed and runs its whole suite; every feature variant of
copier.yml (checks.variants) builds and runs all but the tests its suite marks slow
(conftest.Builds). The variants with compiled code of their own are rendered under a second name with
an underscore in every derived name (checks.ANOTHER_NAME, the minimal one with three devices), so a name
written into the template where an answer belongs shows in the build of each feature's code. A plain
name such as npu adds nothing to these.

Each class below is one build (checks.build_group): `make test` runs pytest-xdist with
`--dist loadscope`, which runs the tests of one class in one worker process, where conftest.Builds
compiles the project once and every test of the class uses that build. Variants that share a build
are parameters of its class; a variant whose tests are all among those of a run that passed on the
same build is reported as skipped (not run), never as passed."""

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

import checks
import project

VARIANTS = checks.variants()
EXAMPLE_GROUP = checks.build_group(checks.EXAMPLE_NAME, {})


def check_suite(builds, result: tuple[bool | None, str], what: str) -> None:
    """Fails, skips or passes a test by the result of conftest.Builds.build_and_test; a failure names
    the suite's failed tests with the end of their reports."""
    passed, ran = result
    if passed is None:
        pytest.skip(f"not run: {ran}")
    if not passed:
        failures = builds.failures.get(ran, "")
        pytest.fail(f"the test suite of {what} (built as {ran!r}) failed\n{failures}", pytrace=False)


def variants_of(group: str) -> list[str]:
    return [label for label, answers in VARIANTS.items() if checks.build_group(checks.EXAMPLE_NAME, answers) == group]


def render_variant(render, label: str):
    answers = dict(VARIANTS[label])
    return render(answers.pop("backend_name"), **answers)


def build_and_test_variant(builds, render, label: str) -> tuple[bool | None, str]:
    """Builds and tests the variant `label`, with the sanitizers checks.sanitize gives it; then checks
    that the build compiled the C++ of each feature that is on, and of none that is off."""
    root = render_variant(render, label)
    result = builds.build_and_test(root, label, sanitize=checks.sanitize(label))
    built = builds.built.get(builds._digest(checks.build_inputs_digest(root), checks.sanitize(label)))
    if built is not None:
        problems = feature_build_problems(root, built[0], checks.features(VARIANTS[label]))
        assert not problems, f"the build of {built[1]} for variant {label!r}: " + "; ".join(problems)
    return result


def compiled_sources(built) -> set[str]:
    """The sources the build of a project compiles, relative to the project: the files of its
    compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS), and the files each unity unit includes."""
    sources = set()
    for commands in built.glob("build/*/compile_commands.json"):
        for entry in json.loads(commands.read_text()):
            source = Path(entry["directory"], entry["file"])
            if "Unity" in source.parts:
                sources |= {Path(name) for name in re.findall(r'^#include "([^"]+)"', source.read_text(), re.M)}
            else:
                sources.add(source)
    return {str(source.relative_to(built)) for source in sources if source.is_relative_to(built)}


def feature_build_problems(root, built, want: dict) -> list[str]:
    """What the build of a render (built: it, or a project with the same build inputs) compiled against
    copier/features.yml: every C++ source of a feature that is on (its paths in the render), none of a
    feature that is off, and no build directory of the CMake target of a feature that is off."""
    compiled = compiled_sources(built)
    if not compiled:
        return [f"{built} has no compile_commands.json"]
    problems = []
    for feature in checks.FEATURE_LIST:
        patterns = [pattern.replace("{{ package_name }}", "*") for pattern in feature.paths]
        owned = {
            str(path.relative_to(root))
            for pattern in patterns
            for found in root.glob(pattern)
            for path in ([p for p in found.rglob("*") if p.is_file()] if found.is_dir() else [found])
            if path.suffix == ".cpp" and path.relative_to(root).parts[0] == "csrc"
        }
        ours = {source for source in compiled if any(fnmatch.fnmatch(source, f"{p}*") for p in patterns)}
        if want[feature.name] != feature.off_answer:
            problems += [f"{feature.name} is on but {source} is not compiled" for source in sorted(owned - compiled)]
        else:
            problems += [f"{feature.name} is off but {source} is compiled" for source in sorted(ours)]
            if feature.directory:
                problems += [
                    f"{feature.name} is off but CMake built {d}" for d in built.glob(f"build/*/{feature.directory}")
                ]
    return problems


# The Hugging Face Trainer recipe (examples/hf_trainer.py) on the example's device, against the same
# run on the CPU. transformers and accelerate come from requirements-dev.txt; the model is a tiny
# GPT-2 built from a config and the data are synthetic, so nothing is downloaded.
@pytest.fixture(scope="class")
def recipe(tmp_path_factory, builds):
    """run(*args, **env) runs examples/hf_trainer.py with the example's build; returns (exit code,
    stdout + stderr, losses or None). The CPU run serves two tests."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    copy = tmp_path_factory.mktemp("hf") / "foo"
    shutil.copytree(project.EXAMPLE, copy, ignore=shutil.ignore_patterns(*project.BUILD_ARTIFACTS, "*.so"))
    python = builds.python(copy, "example_generated")
    script = project.EXAMPLE / "examples" / "hf_trainer.py"
    base = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}
    runs = {}

    def run(*args: str, **env: str):
        key = (args, tuple(sorted(env.items())))
        if key not in runs:
            result = subprocess.run(
                [str(python), str(script), *args],
                capture_output=True,
                text=True,
                env={**base, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **env},
                timeout=600,
            )
            lines = [line for line in result.stdout.splitlines() if line.startswith("losses ")]
            losses = json.loads(lines[-1][len("losses ") :]) if lines else None
            runs[key] = result.returncode, result.stdout + result.stderr, losses
        return runs[key]

    return run


@pytest.mark.slow
@pytest.mark.backend("foo")
class TestExample:
    """The build of example_generated/ (every feature on): its whole suite, the variants whose
    compiled code is the same, and the training-library recipe of docs/training/libraries.md."""

    def test_checked_in_example_builds_and_passes(self, tmp_path, builds):
        copy = tmp_path / "foo"
        shutil.copytree(project.EXAMPLE, copy, ignore=shutil.ignore_patterns(*project.BUILD_ARTIFACTS, "*.so"))
        check_suite(builds, builds.build_and_test(copy, "example_generated", slow_tests=True), "example_generated")

    @pytest.mark.parametrize("label", variants_of(EXAMPLE_GROUP))
    def test_variant_builds_and_passes(self, render, builds, label):
        check_suite(builds, build_and_test_variant(builds, render, label), f"variant {label!r}")

    def test_trainer_on_the_device_matches_the_cpu(self, recipe):
        code, output, on_cpu = recipe("--cpu")
        assert code == 0 and "trained on cpu" in output, output
        code, output, on_device = recipe(ACCELERATE_TORCH_DEVICE="foo")
        assert code == 0 and "trained on foo:0" in output, output
        assert len(on_device) == len(on_cpu) == 6
        for step, (device_loss, cpu_loss) in enumerate(zip(on_device, on_cpu, strict=True)):
            assert abs(device_loss - cpu_loss) < 1e-4, (step, on_device, on_cpu)
        assert on_device[-1] < on_device[0]  # it learns

    def test_trainer_bf16_through_accelerate_on_the_device(self, recipe):
        """TrainingArguments(bf16=True) is refused (transformers' is_torch_bf16_gpu_available lists
        vendors); ACCELERATE_MIXED_PRECISION=bf16 reaches accelerate, which autocasts on the device."""
        _, _, on_cpu = recipe("--cpu")
        code, output, in_bf16 = recipe(ACCELERATE_TORCH_DEVICE="foo", ACCELERATE_MIXED_PRECISION="bf16")
        assert code == 0 and "trained on foo:0, mixed precision: bf16" in output, output
        for device_loss, cpu_loss in zip(in_bf16, on_cpu, strict=True):
            assert abs(device_loss - cpu_loss) < 2e-3, (in_bf16, on_cpu)

    def test_trainer_without_the_variable_transformers_and_accelerate_disagree(self, recipe):
        """What the page tells users to avoid: accelerate finds the device through torch.accelerator
        and moves the model there, TrainingArguments keeps the CPU, and the first step fails. If a
        release of transformers fixes it, this test fails: update docs/training/libraries.md."""
        code, output, _ = recipe()
        expected = "Calculated loss must be on the original device: cpu but device in use is foo:0"
        assert code != 0 and expected in output, output


@pytest.mark.slow
@pytest.mark.backend("foo")
class TestRuntimeSanitized:
    """The driver (csrc/runtime) of a render with every feature on, built alone without torch (the
    CMake option RUNTIME_ONLY) with ASan and UBSan, and its conformance tests run by ctest under them,
    leak check included: a use after free, a leak or undefined behaviour in the driver fails here in
    about a minute, in the code of every feature, not only of the variant built sanitized with torch
    (checks.SANITIZED_VARIANTS)."""

    SANITIZE = "address,undefined"

    def test_conformance_tests_pass_under_the_sanitizers(self, render, tmp_path):
        root = render("foo")
        build = tmp_path / "runtime"
        configure = [checks.tool("cmake"), "-S", str(root), "-B", str(build), "-G", "Ninja"]
        configure += ["-DRUNTIME_ONLY=ON", f"-DSANITIZE={self.SANITIZE}"]
        compile_tests = [checks.tool("cmake"), "--build", str(build), "--target", "runtime_tests"]
        for command in (configure, compile_tests):
            result = subprocess.run(command, capture_output=True, text=True, timeout=900)
            assert result.returncode == 0, result.stdout + result.stderr
        # The options and suppressions of the project's harness; no preloaded runtime: the programs
        # are instrumented themselves, ctest is not (its own allocations would be reported).
        harness = [sys.executable, str(root / "tests" / "sanitizers" / "harness.py"), "sanitizer-env"]
        listing = subprocess.run(
            harness, capture_output=True, text=True, check=True, env={**os.environ, "SANITIZE": self.SANITIZE}
        )
        options = dict(line.split("=", 1) for line in listing.stdout.splitlines())
        assert "detect_leaks=1" in options["ASAN_OPTIONS"] and "halt_on_error=1" in options["UBSAN_OPTIONS"]
        environment = {**os.environ, **{name: value for name, value in options.items() if name.endswith("_OPTIONS")}}
        report = tmp_path / "ctest.xml"
        ctest = [checks.tool("ctest"), "--test-dir", str(build), "--output-on-failure", "--output-junit", str(report)]
        result = subprocess.run(ctest, capture_output=True, text=True, timeout=900, env=environment)
        assert result.returncode == 0, result.stdout + result.stderr
        outcomes = {
            case.get("name"): case.get("status") for case in ElementTree.parse(report).getroot().iter("testcase")
        }
        assert len(outcomes) == 4 and set(outcomes.values()) == {"run"}, outcomes


def variant_build_class(group: str, labels: list[str]) -> type:
    """The test class of one build that only feature variants use (a feature that changes C++ off)."""

    @pytest.mark.parametrize("label", labels)
    def test_variant_builds_and_passes(self, render, builds, label):
        check_suite(builds, build_and_test_variant(builds, render, label), f"variant {label!r}")

    name = "TestVariant" + "".join(word.capitalize() for word in re.split(r"[\W_]+", labels[0]))
    answers = dict(VARIANTS[labels[0]])
    marks = [pytest.mark.slow, pytest.mark.backend(answers.pop("backend_name"), **answers)]
    return type(name, (), {"pytestmark": marks, "test_variant_builds_and_passes": test_variant_builds_and_passes})


for _group in dict.fromkeys(checks.build_group(checks.EXAMPLE_NAME, answers) for answers in VARIANTS.values()):
    if _group != EXAMPLE_GROUP:
        _class = variant_build_class(_group, variants_of(_group))
        globals()[_class.__name__] = _class


def test_every_variant_is_tested_once_in_the_class_of_its_build():
    tested: dict[str, type] = {}
    for cls in [value for name, value in globals().items() if name.startswith("Test") and isinstance(value, type)]:
        method = getattr(cls, "test_variant_builds_and_passes", None)
        labels = next((mark.args[1] for mark in getattr(method, "pytestmark", []) if mark.name == "parametrize"), [])
        for label in labels:
            assert label not in tested, f"{label} is tested in {tested[label].__name__} and {cls.__name__}"
            tested[label] = cls
    assert sorted(tested) == sorted(VARIANTS)
    groups: dict[type, set[str]] = {}
    for label, cls in tested.items():
        groups.setdefault(cls, set()).add(checks.build_group(checks.EXAMPLE_NAME, VARIANTS[label]))
    assert all(len(group) == 1 for group in groups.values()), groups


def test_slow_generated_tests_run_only_where_asked_and_once(monkeypatch, tmp_path):
    """Builds: a suite's slow tests run once, in the build that asks for them, and a later request for
    the same tests reuses what ran (the whole suite covers the fast part, and the other way round)."""
    from conftest import FAST, SLOW, WHOLE, Builds

    runs = []
    monkeypatch.setattr(project, "build", lambda path, jobs, sanitize: runs.append((path.name, "build")))
    monkeypatch.setattr(project, "reuse_build", lambda built, path: built)
    monkeypatch.setattr(
        project,
        "run_tests",
        lambda path, *args, python=None, sanitize="": runs.append((path.name, " ".join(args))) or 0,
    )
    monkeypatch.setattr(checks, "test_inputs_digest", lambda path: path.name[0])  # a, a2: same tests
    monkeypatch.setattr(checks, "test_only_inputs", lambda path: {"tests": path.name[0]})
    monkeypatch.setattr(checks, "build_inputs_digest", lambda path: "same build")
    builds = Builds()
    assert builds.build_and_test(tmp_path / "a", "a") == (True, "a")
    assert builds.build_and_test(tmp_path / "a2", "a2", slow_tests=True)[0]
    assert builds.build_and_test(tmp_path / "b", "b", slow_tests=True)[0]
    assert builds.build_and_test(tmp_path / "b2", "b2")[0] and builds.build_and_test(tmp_path / "b3", "b3")[0]
    assert runs == [("a", "build"), ("a", f"-m {FAST}"), ("a2", f"-m {SLOW}"), ("b", WHOLE)]


STORMS = ("test_fork.py", "test_exit.py", "test_stress.py")  # storms of processes and threads


def test_the_tests_the_builds_leave_out_are_exactly_the_marked_ones(render):
    """Builds other than the example pass `-m "not slow"`: the marker must be registered in every
    generated project (an unknown marker only warns) and set on the files that take minutes alone."""
    for name, answers, expected in (
        (
            "foo",
            {},
            {
                "test_compile.py",
                "test_opinfo.py",
                "test_dtype_coverage.py",
                "test_fallback_sweep.py",
                "test_distributed_faults.py",
                "test_distributed_training.py",
                "test_distributed_init.py",
                *STORMS,
            },
        ),
        ("bar", {"opinfo_tests": False, "distributed": False}, {"test_compile.py", *STORMS}),
    ):
        root = render(name, **answers)
        ini = checks.tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
        assert any(marker.startswith("slow:") for marker in ini["markers"])
        marked = {p.name for p in (root / "tests").glob("*.py") if "pytest.mark.slow" in p.read_text()}
        assert marked == expected


def test_a_render_whose_tests_all_ran_and_passed_on_its_build_is_reported_as_not_run(monkeypatch, tmp_path):
    """Builds: turning off a feature that only adds tests (benchmarks, OpInfo) leaves the other test
    files unchanged; their run on the same build has passed already, so none is repeated, and the
    render is reported as not run (None), naming the run that covered it. A changed file, another
    build, or a run that failed still means a run of its own."""
    from conftest import FAST, Builds

    runs = []
    monkeypatch.setattr(project, "build", lambda path, jobs, sanitize: runs.append((path.name, "build")))
    monkeypatch.setattr(project, "reuse_build", lambda built, path: built)
    monkeypatch.setattr(
        project, "run_tests", lambda path, *args, python=None, sanitize="": runs.append((path.name, args)) or 0
    )
    inputs = {
        "all": {"tests/a.py": "1", "tests/b.py": "2"},
        "fewer": {"tests/a.py": "1"},
        "changed": {"tests/a.py": "3"},
        "other": {"tests/a.py": "1"},
    }
    monkeypatch.setattr(checks, "test_only_inputs", lambda path: inputs[path.name])
    monkeypatch.setattr(checks, "test_inputs_digest", lambda path: path.name)
    monkeypatch.setattr(checks, "build_inputs_digest", lambda path: "second" if path.name == "other" else "first")
    builds = Builds()
    results = {name: builds.build_and_test(tmp_path / name, name) for name in ("all", "fewer", "changed", "other")}
    assert {name: passed for name, (passed, _) in results.items()} == {
        "all": True,
        "fewer": None,
        "changed": True,
        "other": True,
    }
    assert "all" in results["fewer"][1]
    assert runs == [
        ("all", "build"),
        ("all", ("-m", FAST)),
        ("changed", ("-m", FAST)),
        ("other", "build"),
        ("other", ("-m", FAST)),
    ]


def test_a_sanitized_build_is_its_own_and_its_suite_runs_under_the_sanitizers(monkeypatch, tmp_path):
    """Builds: a variant built with sanitizers (checks.sanitize) shares neither its build nor its test
    run with a plain render of the same inputs, and the sanitizers reach the build and the test run;
    the variant checks.SANITIZED_VARIANTS names is one that `make test` builds."""
    from conftest import FAST, Builds

    runs = []
    monkeypatch.setattr(project, "build", lambda path, jobs, sanitize: runs.append((path.name, "build", sanitize)))
    monkeypatch.setattr(project, "reuse_build", lambda built, path: built)
    monkeypatch.setattr(
        project,
        "run_tests",
        lambda path, *args, python=None, sanitize="": runs.append((path.name, args, sanitize)) or 0,
    )
    monkeypatch.setattr(checks, "test_inputs_digest", lambda path: "same tests")
    monkeypatch.setattr(checks, "build_inputs_digest", lambda path: "same build")
    monkeypatch.setattr(checks, "test_only_inputs", lambda path: {})
    builds = Builds()
    assert builds.build_and_test(tmp_path / "plain", "plain") == (True, "plain")
    assert builds.build_and_test(tmp_path / "asan", "asan", sanitize="address,undefined")[0]
    assert builds.build_and_test(tmp_path / "again", "again", sanitize="address,undefined")[0]
    assert runs == [
        ("plain", "build", ""),
        ("plain", ("-m", FAST), ""),
        ("asan", "build", "address,undefined"),
        ("asan", ("-m", FAST), "address,undefined"),
    ]
    assert checks.SANITIZED_VARIANTS and set(checks.SANITIZED_VARIANTS) <= set(VARIANTS)
    assert all(checks.sanitize(label) == sanitizers for label, sanitizers in checks.SANITIZED_VARIANTS.items())
    assert checks.sanitize("everything") == ""


def test_a_failed_suite_is_reported_with_its_failed_tests(monkeypatch, tmp_path):
    """A generated suite that fails is named with the tests that failed and the end of their reports
    (project.failure_summary reads the suite's JUnit report), so that a CI log cut in the middle still
    shows why."""
    from conftest import Builds

    def run_tests(path, *args, python=None, sanitize=""):
        (path / project.RESULTS_FILE).parent.mkdir(parents=True, exist_ok=True)
        (path / project.RESULTS_FILE).write_text(
            '<testsuites><testsuite name="pytest"><testcase classname="tests.test_a" name="test_ok"/>'
            '<testcase classname="tests.test_b" name="test_ranks"><failure message="a rank failed">'
            "a rank failed\n--- rank 1 (exit -6) stderr:\nterminate called</failure></testcase>"
            "</testsuite></testsuites>"
        )
        return 1

    monkeypatch.setattr(project, "build", lambda path, jobs, sanitize: None)
    monkeypatch.setattr(project, "run_tests", run_tests)
    monkeypatch.setattr(checks, "test_inputs_digest", lambda path: "tests")
    monkeypatch.setattr(checks, "build_inputs_digest", lambda path: "build")
    monkeypatch.setattr(checks, "test_only_inputs", lambda path: {})
    builds = Builds()
    (tmp_path / "p").mkdir()
    result = builds.build_and_test(tmp_path / "p", "p")
    assert result == (False, "p")
    with pytest.raises(pytest.fail.Exception) as failed:
        check_suite(builds, result, "p")
    message = str(failed.value)
    assert "failure: tests.test_b::test_ranks" in message and "rank 1 (exit -6)" in message
    assert "test_ok" not in message


def test_the_build_check_finds_a_feature_compiled_or_left_out(tmp_path):
    """feature_build_problems, on a build directory made by hand: a source of a feature that is on and
    that no unit compiles, a compiled source or a target directory of a feature that is off."""
    root = tmp_path / "foo"
    for name in ("csrc/core/Device.cpp", "csrc/compile/CompiledKernels.cpp", "csrc/core/Graph.cpp"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("// source\n")
    build = root / "build" / "cpython-311"
    unity = build / "csrc/core/CMakeFiles/foo_core.dir/Unity/unity_0_cxx.cxx"
    unity.parent.mkdir(parents=True)
    unity.write_text(f'#include "{root}/csrc/core/Device.cpp"\n#include "{root}/csrc/core/Graph.cpp"\n')
    (build / "csrc/compile").mkdir(parents=True)
    commands = [{"directory": str(build), "file": str(unity)}]
    (build / "compile_commands.json").write_text(json.dumps(commands))
    assert compiled_sources(root) == {"csrc/core/Device.cpp", "csrc/core/Graph.cpp"}
    everything = checks.features({})
    assert feature_build_problems(root, root, everything) == [
        "compile is on but csrc/compile/CompiledKernels.cpp is not compiled"
    ]
    problems = feature_build_problems(root, root, {**everything, "compile": False, "graphs": False})
    assert problems == [
        f"compile is off but CMake built {build / 'csrc/compile'}",
        "graphs is off but csrc/core/Graph.cpp is compiled",
    ]

"""Checks of the template repository beyond rendering: lint, the CI workflows (the template's own
and the generated one), the docs site, and the feature variants of copier.yml.

    python scripts/checks.py lint         the parts generated from copier/features.yml, ruff on scripts/ and
                                          tests/, formatting of renders, actionlint
    python scripts/checks.py docs [DIR]   build the documentation site in strict mode (into DIR, default site/)
    python scripts/checks.py variants     list the feature variants the test suite builds, and which share a build

The Makefile and tests/ call these functions, so `make lint` and the test suite check the same things.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's dependency
    import tomli as tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))
import facts  # noqa: E402
import features as features_list  # noqa: E402
import project  # noqa: E402

ROOT = project.ROOT
BIN = Path(sysconfig.get_path("scripts"))

# Feature choices: their one source is copier/features.yml (scripts/features.py reads it). A new
# optional feature adds its entry there; tests/test_variants.py then covers it.
FEATURE_LIST = features_list.load()
# The answer that turns each feature off, by name. The full preset (copier.yml's default) turns
# everything on (the example shows every feature).
FEATURES_OFF: dict[str, object] = {
    feature.name: feature.off_answer for feature in sorted(FEATURE_LIST, key=lambda f: f.name)
}
# The answer that includes each feature (the full preset's).
FEATURES_ON: dict[str, object] = {name: features_list.by_name(FEATURE_LIST)[name].on_answer for name in FEATURES_OFF}
# What the preset `minimal` gives: each feature's `minimal` answer, every feature off but the CI workflow.
MINIMAL: dict[str, object] = {
    name: features_list.by_name(FEATURE_LIST)[name].defaults["minimal"] for name in FEATURES_OFF
}
# Features with compiled code that one variant turns off together (their `off_group`), so that
# `make test` builds fewer projects: each build with its not-slow suite costs a worker 5 to 8 minutes
# (docs/development.md). No feature needs another, so a group turned off still proves that each of
# its features, off, leaves a project that builds and passes; the `minimal` variant has them all off
# at once. A feature in no group is a variant of its own. Each group in the order of copier/features.yml.
OFF_TOGETHER: tuple[tuple[str, ...], ...] = tuple(
    tuple(feature.name for feature in FEATURE_LIST if feature.off_group == group)
    for group in dict.fromkeys(feature.off_group for feature in FEATURE_LIST if feature.off_group)
)

# Paths of a render that neither the build (setup.py compiles csrc/ and installs the package) nor
# the project's test suite reads. Two renders that agree on everything else compile the same code
# and run the same tests, so one build and test run covers both (see test_inputs_digest).
NOT_BUILD_INPUTS = ("README.md", ".copier-answers.yml", ".github", ".pre-commit-config.yaml")
# Paths only the test suite reads (tests/test_benchmark_report.py runs benchmarks/). Two renders that
# differ only here share one compiled extension, and each runs its own tests against it (see
# build_inputs_digest).
TEST_ONLY_INPUTS = ("tests", "benchmarks")
# Answers that change only files the build does not read (TEST_ONLY_INPUTS and NOT_BUILD_INPUTS): the
# features that compile nothing (`compiles: false` in copier/features.yml); renders that differ only
# in these share one build. tests/test_variants.py checks it against the build digests of the
# variants; the parallel test run (tests/conftest.py) schedules by it.
TEST_ONLY_ANSWERS = tuple(sorted(feature.name for feature in FEATURE_LIST if not feature.compiles))


def tool(name: str) -> str:
    """A command-line tool installed next to this interpreter (the .venv of make), else from PATH."""
    path = BIN / name
    return str(path) if path.exists() else name


# The names the variants are rendered under. Those that compile the example's code (a feature that only
# adds tests or CI off) are the example's name, so they share its build. Those with code of their own
# take a second name with an underscore in every derived name (package, macro prefix, c10d backend),
# so that a name written into the template where an answer belongs fails in each feature's code, and
# no build of its own is spent on another name. The minimal project also runs three devices.
EXAMPLE_NAME = "foo"
ANOTHER_NAME = "my_accel"
ANOTHER_DEVICE_COUNT = 3


# The variants pinned to the supported torch releases other than the default (copier/torch.yml), the
# first to the newest of them, and so on: `make test` builds each against its release
# (project.release_env) and runs its suite there. Each keeps compile, distributed and the profiler on,
# so that their tests run on every release; the example's whole suite runs on the default release.
OTHER_RELEASE_VARIANTS = ("custom_op and kernel_families off", "benchmarks off")

# The variants whose build `make test` instruments with sanitizers (SANITIZE: ASan and UBSan, with
# LeakSanitizer's check at every process exit) and whose not-slow suite runs under them, through the
# generated project's tests/sanitizers/harness.py, so that a use after free, a leak or undefined
# behaviour in the code the template generates fails `make test`. The minimal project is the
# cheapest build; its features' driver and the others' are also checked sanitized without torch
# (tests/test_build.py, TestRuntimeSanitized).
SANITIZED_VARIANTS = {"minimal": "address,undefined"}


def off_label(names: tuple[str, ...]) -> str:
    """The variant label of `names` turned off: "compile off", "custom_op and kernel_families off"."""
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"{listed} off"


def off_groups() -> list[tuple[str, ...]]:
    """The features each off-variant turns off, in FEATURES_OFF's order: OFF_TOGETHER's groups, and
    every other feature alone."""
    grouped = {name: group for group in OFF_TOGETHER for name in group}
    unknown = set(grouped) - set(FEATURES_OFF)
    if unknown:
        raise ValueError(f"OFF_TOGETHER names {sorted(unknown)}, which are not in FEATURES_OFF")
    return list(dict.fromkeys(grouped.get(name, (name,)) for name in FEATURES_OFF))


def variants() -> dict[str, dict[str, object]]:
    """Answer sets covering each class of feature combination: everything (the defaults), the
    minimal project (the preset `minimal`) and each option off, alone or in its OFF_TOGETHER group;
    each with its backend_name, and the torch_version of those built against another release
    (OTHER_RELEASE_VARIANTS)."""
    result: dict[str, dict[str, object]] = {"everything": {}, "minimal": {"preset": "minimal"}}
    for group in off_groups():
        result[off_label(group)] = {name: FEATURES_OFF[name] for name in group}
    others = facts.other_torch_releases()
    if len(others) > len(OTHER_RELEASE_VARIANTS):
        raise ValueError(f"torch releases {others} need as many OTHER_RELEASE_VARIANTS: add one")
    for release, label in zip(others, OTHER_RELEASE_VARIANTS, strict=False):
        result[label]["torch_version"] = release
    example = build_group(EXAMPLE_NAME, {})
    for label, answers in result.items():
        if build_group(EXAMPLE_NAME, answers) == example:
            answers["backend_name"] = EXAMPLE_NAME
        else:
            answers["backend_name"] = ANOTHER_NAME
            if label == "minimal":
                answers["device_count"] = ANOTHER_DEVICE_COUNT
    return result


def sanitize(label: str) -> str:
    """The sanitizers the build of variant `label` is instrumented with (SANITIZE), "" for none."""
    return SANITIZED_VARIANTS.get(label, "")


def features(answers: dict[str, object]) -> dict[str, object]:
    """The value of every feature question for these answers: the preset's defaults (full and custom:
    every feature on, FEATURES_ON; minimal: MINIMAL), then the answers given (copier.yml, preset)."""
    preset = MINIMAL if answers.get("preset") == "minimal" else FEATURES_ON
    return {name: answers.get(name, preset[name]) for name in FEATURES_OFF}


def build_group(name: str, answers: dict[str, object]) -> str:
    """A label shared by the renders of name (or the answers' backend_name) with these answers that
    compile the same extension. The features count by value (a preset and the answers it stands for
    are one group), those that are on as in the defaults not at all."""
    chosen = features(answers)
    name = str(answers.get("backend_name", name))
    skipped = ("preset", "backend_name", *FEATURES_OFF)
    answers = {key: value for key, value in answers.items() if key not in skipped}
    answers |= {key: value for key, value in chosen.items() if value != FEATURES_ON[key]}
    build_answers = sorted((key, value) for key, value in answers.items() if key not in TEST_ONLY_ANSWERS)
    return "+".join([name, *(f"{key}={value}" for key, value in build_answers)])


def _content(root: Path, path: Path, build_only: bool) -> bytes:
    """What the build reads of a file. Of pyproject.toml that is everything but the dependency lists
    and pytest's settings: project.build installs with --no-deps, so lists such as the test extras
    never change a build, and only the test suite reads [tool.pytest]."""
    if path == Path("pyproject.toml"):
        config = tomllib.loads((root / path).read_text())
        for key in ("dependencies", "optional-dependencies"):
            config.get("project", {}).pop(key, None)
        if build_only:
            config.get("tool", {}).pop("pytest", None)
        return json.dumps(config, sort_keys=True).encode()
    return (root / path).read_bytes()


def _digest(root: Path, include, build_only: bool) -> str:
    digest = hashlib.sha256()
    # The torch a project is built against (project.make_env): its pin counts, though only the
    # answers file (not a build input) states it where the pyproject's lower bound does not differ.
    digest.update(f"torch {project.pinned_torch(root)}\0".encode())
    for path in sorted(project.tree(root)):
        if path.parts[0] not in NOT_BUILD_INPUTS and include(path):
            digest.update(str(path).encode() + b"\0" + _content(root, path, build_only) + b"\0")
    return digest.hexdigest()


def build_inputs_digest(root: Path) -> str:
    """A digest of every file of a project that the build reads (the C++ sources, setup.py, the
    package): renders with equal digests compile the same extension."""
    return _digest(root, lambda path: path.parts[0] not in TEST_ONLY_INPUTS, build_only=True)


def test_inputs_digest(root: Path) -> str:
    """A digest of every file that the build or the test suite reads: renders with equal digests
    compile the same extension and run the same tests, so one test run covers them all."""
    return _digest(root, lambda path: True, build_only=False)


def test_only_inputs(root: Path) -> dict[str, str]:
    """The digest of each file only the test suite reads (TEST_ONLY_INPUTS), and of pytest's settings
    under the key "[tool.pytest]". A render whose build digest equals another's and whose map is part
    of the other's (the same files, fewer of them: a feature's tests left out) runs a subset of the
    other's tests against the same extension."""
    inputs = {
        str(path): hashlib.sha256((root / path).read_bytes()).hexdigest()
        for path in sorted(project.tree(root))
        if path.parts[0] in TEST_ONLY_INPUTS
    }
    settings = tomllib.loads((root / "pyproject.toml").read_text()).get("tool", {}).get("pytest", {})
    inputs["[tool.pytest]"] = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()
    return inputs


def ruff_problems() -> list[str]:
    """ruff check and ruff format --check on the template's own Python code (scripts/, tests/)."""
    problems = []
    for command in (["check", "--output-format", "concise", "."], ["format", "--check", "."]):
        result = subprocess.run([tool("ruff"), *command], cwd=ROOT, capture_output=True, text=True)
        if result.returncode != 0:
            problems += [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return problems


def actionlint_problems(root: Path) -> list[str]:
    """actionlint findings in the GitHub workflows of a rendered project or of this repository (root),
    shellcheck included when installed."""
    workflows = sorted((root / ".github" / "workflows").glob("*.y*ml"))
    if not workflows:
        return [f"{root.name}: no workflow under .github/workflows"]
    result = subprocess.run(
        [tool("actionlint"), "-oneline", "-no-color", *[str(w.relative_to(root)) for w in workflows]],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},  # finds shellcheck
    )
    if result.returncode != 0:
        return [f"[{root.name}] {line}" for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return []


def workflow_problems() -> list[str]:
    """actionlint on the template's own CI workflow and on the workflow of every variant that has one."""
    problems = actionlint_problems(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        for label, answers in variants().items():
            if answers.get("ci", "github") != "github":
                continue
            root = project.render(Path(tmp) / label.replace(" ", "-"), {"backend_name": "foo", **answers})
            problems += actionlint_problems(root)
    return problems


def lint() -> list[str]:
    import format_template

    stale = [f"{path}: stale, run `python scripts/features.py --write`" for path in features_list.stale()]
    return stale + ruff_problems() + format_template.check_names(format_template.CHECK_NAMES) + workflow_problems()


def build_docs(site_dir: Path) -> subprocess.CompletedProcess:
    """mkdocs build --strict: any warning (broken link, page missing from the nav, ...) fails."""
    return subprocess.run(
        [tool("mkdocs"), "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        # mkdocs-material prints a banner about its successor on every build; keep logs to findings.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "NO_COLOR": "1"},
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("lint", help="ruff, formatting of renders, actionlint on the CI workflows")
    p = sub.add_parser("docs", help="build the documentation site in strict mode")
    p.add_argument("site_dir", nargs="?", default=str(ROOT / "site"))
    sub.add_parser("variants", help="list feature variants and which of them share a build")
    args = parser.parse_args()

    if args.command == "lint":
        problems = lint()
        print("\n".join(problems) or "lint: ruff, formatting of renders and actionlint found nothing")
        return 1 if problems else 0
    if args.command == "docs":
        result = build_docs(Path(args.site_dir))
        print(result.stdout + result.stderr, end="")
        if result.returncode == 0:
            print(f"documentation site built in {args.site_dir}")
        return result.returncode
    if args.command == "variants":
        with tempfile.TemporaryDirectory() as tmp:
            builds: dict[str, str] = {}
            tests: dict[str, str] = {}
            listed = variants()
            width = max(map(len, listed))
            for label, answers in listed.items():
                root = project.render(Path(tmp) / label.replace(" ", "-"), {"backend_name": "foo", **answers})
                build, test = build_inputs_digest(root), test_inputs_digest(root)
                if sanitize(label):  # never shared (tests/conftest.py, Builds)
                    shared = f"own build, sanitized: {sanitize(label)}"
                    build, test = f"{build} {sanitize(label)}", f"{test} {sanitize(label)}"
                elif test in tests:
                    shared = f"same build and tests as {tests[test]}"
                elif build in builds:
                    shared = f"build of {builds[build]}, own test run"
                else:
                    shared = "own build and test run"
                builds.setdefault(build, label)
                tests.setdefault(test, label)
                print(f"{label:{width}} {shared:42} {answers or '(defaults)'}")
                shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())

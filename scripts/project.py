"""Render, build and test projects from this template; keep example_generated/ in sync.

    python scripts/project.py render NAME [DEST]      render the template for backend NAME
    python scripts/project.py build-test NAME|DIR     render (if NAME), build in its own venv, run its tests
        (both take --data KEY=VALUE for other answers, e.g. --data benchmarks=false --data ci=none)
    python scripts/project.py example [--check]       regenerate example_generated/ (or check it is current)
    python scripts/project.py demo                    render foo, build it, and run a tensor on the device

The Makefile, CI and tests/ all go through these functions, so there is one way to do each task.
Each built project gets its own virtual environment layered over the current one (a .pth file
points at this interpreter's site-packages, so torch is shared and not reinstalled): two backends
installed in one environment would both try to claim PrivateUse1 on `import torch`.
"""

from __future__ import annotations

import argparse
import fcntl
import filecmp
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import facts  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "example_generated"
WORK = ROOT / ".work"
EXAMPLE_DATA = {"backend_name": "foo"}
# Files a build or test run leaves in a project; never part of a render.
BUILD_ARTIFACTS = {".venv", "build", "__pycache__", ".pytest_cache", ".ruff_cache"}
BUILD_SUFFIXES = (".so", ".egg-info", ".pyc")
# What CMake builds of the generated project's tests/runtime (target runtime_tests), in build/<dir>/tests/runtime.
RUNTIME_TEST_PROGRAMS = ("contract_test", "emulation_test", "add_one.so")
# A generated test suite that runs longer than this has hung (the whole suite of the example takes
# about half of it on two cores): run_tests stops it and reports a failure.
SUITE_TIMEOUT = int(os.environ.get("SUITE_TIMEOUT", 3000))
# Where run_tests has pytest write its JUnit report, in the project (a build artifact: never an input).
RESULTS_FILE = Path(".pytest_cache") / "results.xml"
# Environments with another supported torch release than the running one (release_env), made once and
# reused by later runs (the CUDA build of the package index is a few GB).
RELEASE_ENVS = ROOT / ".venv-releases"


def render(dest: Path, data: dict | None = None, overwrite: bool = False) -> Path:
    """Renders the working tree of the template (uncommitted changes included) into dest."""
    import warnings

    from copier import run_copy

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Dirty template changes included automatically")
        run_copy(
            str(ROOT),
            str(dest),
            data=dict(data or {}),
            defaults=True,
            overwrite=overwrite,
            unsafe=True,
            quiet=True,
            vcs_ref="HEAD",
        )
    return dest


def normalise_answers(project: Path) -> None:
    """Makes the answers file of a render reproducible: the example points at the template one
    directory up (so `copier update` works from it) and records no commit."""
    answers = project / ".copier-answers.yml"
    lines = []
    for line in answers.read_text().splitlines():
        if line.startswith("_commit:"):
            continue
        if line.startswith("_src_path:"):
            line = "_src_path: .."
        lines.append(line)
    answers.write_text("\n".join(lines) + "\n")


def is_artifact(path: Path) -> bool:
    return any(part in BUILD_ARTIFACTS or part.endswith(BUILD_SUFFIXES) for part in path.parts)


def tree(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file() and not is_artifact(p.relative_to(root))}


def example_differences() -> list[str]:
    """Paths where example_generated/ differs from a fresh render (empty when in sync)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = render(Path(tmp) / "foo", EXAMPLE_DATA)
        normalise_answers(fresh)
        ours, theirs = tree(fresh), tree(EXAMPLE) if EXAMPLE.exists() else set()
        diffs = [f"only in a fresh render: {p}" for p in sorted(ours - theirs)]
        diffs += [f"only in example_generated: {p}" for p in sorted(theirs - ours)]
        diffs += [
            f"differs: {p}" for p in sorted(ours & theirs) if not filecmp.cmp(fresh / p, EXAMPLE / p, shallow=False)
        ]
        return diffs


def regenerate_example() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = render(Path(tmp) / "foo", EXAMPLE_DATA)
        normalise_answers(fresh)
        if EXAMPLE.exists():
            for path in sorted(tree(EXAMPLE), reverse=True):
                (EXAMPLE / path).unlink()
        for path in tree(fresh):
            target = EXAMPLE / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(fresh / path, target)
        for directory in sorted((p for p in EXAMPLE.rglob("*") if p.is_dir()), reverse=True):
            if not any(directory.iterdir()):
                directory.rmdir()


def _purelib(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def installed_torch() -> str:
    """The release of the torch this interpreter has, such as 2.15.0 (no local label such as +cpu)."""
    from importlib.metadata import version

    return version("torch").split("+")[0]


def pinned_torch(project: Path) -> str | None:
    """The torch release a rendered project is pinned to (its answer torch_version), if it says."""
    answers = project / ".copier-answers.yml"
    if not answers.exists():
        return None
    for line in answers.read_text().splitlines():
        if line.startswith("torch_version:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    return None


def release_env(release: str) -> list[str]:
    """The module path (site directories, first wins) of an environment with torch `release`: this
    interpreter's when it has that release, otherwise RELEASE_ENVS/<release>, made once (pip: the CPU
    build where PyTorch's CPU index answers, else the package index's, scripts/install_torch.py) with
    only torch and what torch needs; the other tools (pytest, numpy, cmake, ...) come from this one."""
    here = sysconfig.get_paths()["purelib"]
    if release == installed_torch():
        return [here]
    env = RELEASE_ENVS / release
    python, stamp = env / "bin" / "python", env / ".installed"
    RELEASE_ENVS.mkdir(parents=True, exist_ok=True)
    with open(RELEASE_ENVS / f".{release}.lock", "w") as lock:  # one maker at a time (pytest-xdist workers)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            shutil.rmtree(env, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
            install = [str(python), str(ROOT / "scripts" / "install_torch.py"), f"torch=={release}"]
            subprocess.run(install, check=True, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
            stamp.touch()
    return [_purelib(python), here]


def make_env(project: Path) -> Path:
    """A virtual environment for one project that sees the packages of this interpreter (torch,
    pytest), or, for a project pinned to another supported release while this interpreter has the
    default one, that release's torch first (release_env)."""
    env = project / ".venv"
    python = env / "bin" / "python"
    if not python.exists():
        # Only under the default release: with another TORCH_SPEC (CI's matrix), every project builds
        # against the torch that was asked for.
        release = pinned_torch(project)
        other = release and release != installed_torch() and installed_torch() == facts.torch_version()
        parents = release_env(release) if other else [sysconfig.get_paths()["purelib"]]
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
        Path(_purelib(python), "_parent_environment.pth").write_text("".join(f"{parent}\n" for parent in parents))
    return python


def build(project: Path, jobs: int | None = None, sanitize: str = "") -> Path:
    """Builds and installs the project (editable) into its own environment; returns its python. With
    `sanitize` (SANITIZE: "address,undefined" or "thread"), every target is instrumented with those
    sanitizers, in a build directory of its own (the generated project's tests/sanitizers/harness.py)."""
    python = make_env(project)
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "SANITIZE": sanitize}
    if jobs:
        env["MAX_JOBS"] = str(jobs)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "-e", str(project)],
        check=True,
        env=env,
    )
    return python


def reuse_build(built: Path, project: Path) -> Path:
    """Gives `project` the compiled extension of `built`, a project built from the same build inputs
    (scripts/checks.py build_inputs_digest: equal C++ sources, setup.py and package, so the same
    binary), instead of compiling it again; returns the interpreter to test `project` with: the
    environment of `built`, whose installed entry points name the same modules. run_tests puts
    `project` first on the module path, so its package (with the copied extension) is the one imported.
    The driver's conformance programs come too (tests/test_runtime.py runs them; CMake builds them in
    `built`'s build directory, whose absolute paths name `built`'s sources, so the project gets the
    programs rather than the directory)."""
    for cache in built.glob("build/*/CMakeCache.txt"):
        # With the cmake that configured it (the cache's CMAKE_COMMAND).
        cmake = next(line for line in cache.read_text().splitlines() if line.startswith("CMAKE_COMMAND:"))
        subprocess.run([cmake.split("=", 1)[1], "--build", str(cache.parent), "--target", "runtime_tests"], check=True)
    programs = (
        path.relative_to(built)
        for path in built.glob("build/*/tests/runtime/*")
        if path.is_file() and path.name in RUNTIME_TEST_PROGRAMS
    )
    for path in [*compiled_files(built), *programs]:
        target = project / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built / path, target)
    return built / ".venv" / "bin" / "python"


def compiled_files(root: Path) -> list[Path]:
    """The compiled extension modules a build put into the project's tree (beside its package, for
    the editable install), relative to root; not those in its environment or build/ directory."""
    found = (path.relative_to(root) for path in root.rglob("*.so") if path.is_file())
    return sorted(path for path in found if path.parts[0] not in BUILD_ARTIFACTS)


def run_tests(project: Path, *pytest_args: str, python: Path | None = None, sanitize: str = "") -> int:
    """Runs the project's test suite with its own environment, or with `python` (see reuse_build).
    With `sanitize`, the build of those sanitizers (build(sanitize=...)) runs under them: pytest starts
    through the project's harness (tests/sanitizers/harness.py sanitized), which preloads the runtime and
    sets the options and suppressions; a sanitizer's report fails the run."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    env["SANITIZE"] = sanitize
    if python is None:
        python = make_env(project)
    else:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(project), env.get("PYTHONPATH")) if p)
    harness = [str(python), str(Path("tests", "sanitizers", "harness.py")), "sanitized"] if sanitize else []
    try:
        return subprocess.run(
            [*harness, str(python), "-m", "pytest", "-q", f"--junitxml={RESULTS_FILE}", *pytest_args],
            cwd=project,
            env=env,
            timeout=SUITE_TIMEOUT,
        ).returncode
    except subprocess.TimeoutExpired:
        # A hang fails the run instead of the caller (CI): the suite's faulthandler_timeout has printed
        # the stacks of the test that hung by then.
        print(f"{project.name}: the test suite did not finish within {SUITE_TIMEOUT} s", file=sys.stderr)
        return 124


def failure_summary(project: Path, limit: int = 8000) -> str:
    """The tests that failed in the last run_tests of project (its JUnit report), each with the end of
    its report, at most `limit` characters from the end: what a failing CI log must show even when
    it keeps only the beginning and the end of a long output."""
    path = project / RESULTS_FILE
    if not path.exists():
        return ""
    import xml.etree.ElementTree as ElementTree

    parts = []
    for case in ElementTree.parse(path).iter("testcase"):
        for problem in [*case.iter("failure"), *case.iter("error")]:
            text = (problem.text or problem.get("message") or "").strip()
            parts.append(f"{problem.tag}: {case.get('classname')}::{case.get('name')}\n{text[-1500:]}")
    return "\n\n".join(parts)[-limit:]


def resolve(name_or_dir: str, answers: dict | None = None) -> Path:
    """A project directory: an existing directory, or a fresh render of NAME under .work/."""
    path = Path(name_or_dir)
    if path.is_dir():
        return path.resolve()
    dest = WORK / name_or_dir
    if dest.exists():
        shutil.rmtree(dest)
    return render(dest, {"backend_name": name_or_dir, **(answers or {})})


def parse_data(items: list[str]) -> dict:
    """--data KEY=VALUE answers; values are YAML (false, 3, none -> the string "none")."""
    import yaml

    answers = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--data expects KEY=VALUE, got {item!r}")
        parsed = yaml.safe_load(value)
        answers[key] = value if parsed is None else parsed
    return answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("render", help="render the template for a backend name")
    p.add_argument("name")
    p.add_argument("dest", nargs="?")
    p.add_argument("--data", action="append", default=[], metavar="KEY=VALUE", help="another answer")
    p = sub.add_parser("build-test", help="render, build and test a backend")
    p.add_argument("project", help="backend name (rendered under .work/) or project directory")
    p.add_argument("pytest_args", nargs="*")
    p.add_argument("--data", action="append", default=[], metavar="KEY=VALUE", help="another answer")
    p = sub.add_parser("example", help="regenerate example_generated/")
    p.add_argument("--check", action="store_true", help="only report differences")
    sub.add_parser("demo", help="render, build and run the default backend")
    args = parser.parse_args()

    if args.command == "render":
        dest = Path(args.dest) if args.dest else WORK / args.name
        print(render(dest, {"backend_name": args.name, **parse_data(args.data)}))
    elif args.command == "build-test":
        project = resolve(args.project, parse_data(args.data))
        build(project)
        return run_tests(project, *args.pytest_args)
    elif args.command == "example":
        if args.check:
            diffs = example_differences()
            print("\n".join(diffs) or "example_generated/ is up to date")
            return 1 if diffs else 0
        regenerate_example()
        print(f"regenerated {EXAMPLE.relative_to(ROOT)}")
    elif args.command == "demo":
        project = resolve("foo")
        python = build(project)
        code = (
            "import torch\n"
            "x = torch.ones(2, device='foo') + 1\n"
            "print(x)\n"
            "print('devices:', torch.foo.device_count(), '| accelerator:', torch.accelerator.current_accelerator())\n"
            "model = torch.nn.Linear(4, 2).to('foo')\n"
            "print('model output on', model(torch.randn(3, 4, device='foo')).device)\n"
        )
        subprocess.run([str(python), "-c", code], check=True)
        print(f"\nThe project is in {project}; its tests: cd {project} && .venv/bin/python -m pytest")
    return 0


if __name__ == "__main__":
    sys.exit(main())

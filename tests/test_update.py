"""`copier update`: a project generated from an older release, then edited by its user, takes the
current release: the user's edits survive, the template's changes arrive, a file the template moved
keeps the user's edits through its migration (copier/migrate.py), and nothing is left in conflict.

The test builds its own template repository from the working tree (release v0.1.0), then makes a
release v0.9.0 on top of it the way a maintainer would: a new file, a changed line, and a moved file
with its `_migrations` entry."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from copier import run_copy, run_update
from copier.errors import TaskError
from plumbum import local

import facts
from conftest import ROOT

IDENTITY = {
    "GIT_AUTHOR_NAME": "Template Tests",
    "GIT_AUTHOR_EMAIL": "tests@example.com",
    "GIT_COMMITTER_NAME": "Template Tests",
    "GIT_COMMITTER_EMAIL": "tests@example.com",
}
NAME = "my_npu"
USER_TEST = """

def test_added_by_the_user():
    assert (torch.ones(3, device="my_npu") * 2).sum().item() == 6
"""
USER_README = "\n## Our lab notes\n\nBuilt nightly on the lab machine.\n"
USER_INIT = "\n\n# Our lab's addition.\nLAB_BUILD = True\n"
MIGRATION = (
    "_migrations:\n"
    "  - version: v0.9.0\n"
    '    command: ["{{ _copier_python }}", "{{ _copier_conf.src_path }}/copier/migrate.py",\n'
    '              "move", "tests/test_ops.py", "tests/test_elementwise.py"]\n'
)
# Earlier releases, as the commits that were tagged (tags do not travel with the repository; its
# history does). test_update_from_the_previous_release starts from v0.1.0, whose driver this working
# tree split; v0.2.0 is the last release that supports torch 2.13.0 (copier/torch.yml, `retired`).
PREVIOUS_RELEASE = ("v0.1.0", "78205c087c72b971495df95a92b7f47a18a3bfcf")
RELEASES = dict([PREVIOUS_RELEASE, ("v0.2.0", "70e35e530df01b409a907433e15647f7fbed7ccf")])


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env={**os.environ, **IDENTITY}
    )
    return result.stdout


def commit_all(cwd: Path, message: str) -> None:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "--no-gpg-sign", "--no-verify", "-m", message)


def release(repo: Path, tag: str, message: str) -> None:
    commit_all(repo, message)
    git(repo, "tag", tag)


@pytest.fixture
def template_repo(tmp_path):
    """A git repository of the template: the working tree as v0.1.0, and a v0.9.0 on top of it."""
    repo = tmp_path / "template"
    files = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for relative in files:
        source = ROOT / relative
        if relative and source.is_file() and not relative.startswith("example_generated/"):
            (repo / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / relative)
    git(repo.parent, "init", "-q", "-b", "main", repo.name)
    release(repo, "v0.1.0", "Release 0.1.0")

    readme = repo / "template" / "README.md.jinja"
    assert "## Build and test\n" in readme.read_text()
    readme.write_text(readme.read_text().replace("## Build and test\n", "## Build and run the tests\n"))
    (repo / "template" / "CONTRIBUTING.md").write_text("# Contributing\n\nRun `pre-commit install` first.\n")
    git(repo, "mv", "template/tests/test_ops.py.jinja", "template/tests/test_elementwise.py.jinja")
    moved = repo / "template" / "tests" / "test_elementwise.py.jinja"
    moved.write_text("# Elementwise kernels against the CPU (tests/test_ops.py before 0.2.0).\n" + moved.read_text())
    copier_yml = repo / "copier.yml"
    assert "\n_migrations:" in copier_yml.read_text(), "copier.yml must keep its _migrations list for this test"
    text = copier_yml.read_text().replace("\n_migrations: []\n", "\n_migrations:\n")
    copier_yml.write_text(text.replace("\n_migrations:\n", "\n" + MIGRATION, 1))
    release(repo, "v0.9.0", "Release 0.9.0: test_ops.py becomes test_elementwise.py")
    return repo


def generate(repo: Path, dest: Path, ref: str, **answers) -> Path:
    data = {"backend_name": NAME, **answers}
    run_copy(str(repo), dest, data=data, vcs_ref=ref, defaults=True, unsafe=True, quiet=True)
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "Generated from the template")
    return dest


def update(project: Path, ref: str, **answers) -> None:
    with local.env(**IDENTITY):
        run_update(
            project,
            data=answers,
            vcs_ref=ref,
            defaults=True,
            overwrite=True,
            unsafe=True,
            quiet=True,
            skip_answered=True,
        )


def assert_nothing_in_conflict(project: Path) -> None:
    status = git(project, "status", "--porcelain", "--ignored", "--untracked-files=all")
    assert not [line for line in status.splitlines() if line[:2] in {"UU", "AA", "DU", "UD", "AU", "UA", "DD"}]
    assert not list(project.rglob("*.rej")) and not list(project.rglob("*.orig"))
    for path in project.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            text = path.read_text(errors="replace")
            assert "<<<<<<<" not in text and ">>>>>>>" not in text, f"conflict markers in {path}"


def test_update_keeps_user_edits_and_brings_template_changes(template_repo, tmp_path):
    project = generate(template_repo, tmp_path / "project", "v0.1.0")
    assert yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"] == "v0.1.0"

    # The user edits generated files the way people do: a section in the README, a test of their own.
    with (project / "README.md").open("a") as readme:
        readme.write(USER_README)
    with (project / "tests" / "test_ops.py").open("a") as tests:
        tests.write(USER_TEST)
    commit_all(project, "Our changes")

    update(project, "v0.9.0")

    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert answers["_commit"] == "v0.9.0" and answers["backend_name"] == NAME
    readme = (project / "README.md").read_text()
    assert USER_README in readme, "the user's README section was lost"
    assert "## Build and run the tests" in readme and "## Build and test\n" not in readme, "template change missing"
    assert (project / "CONTRIBUTING.md").read_text().startswith("# Contributing"), "new template file missing"
    # The moved file: gone from the old place, at the new place with the template's change and the user's test.
    assert not (project / "tests" / "test_ops.py").exists()
    moved = (project / "tests" / "test_elementwise.py").read_text()
    assert moved.startswith("# Elementwise kernels against the CPU"), "the template's change to the moved file"
    assert USER_TEST in moved, "the user's edit of the moved file was lost"
    compile(moved, "test_elementwise.py", "exec")
    assert_nothing_in_conflict(project)


def test_update_moves_an_unedited_file(template_repo, tmp_path):
    project = generate(template_repo, tmp_path / "project", "v0.1.0")
    update(project, "v0.9.0")
    assert not (project / "tests" / "test_ops.py").exists()
    moved = (project / "tests" / "test_elementwise.py").read_text()
    fresh = run_copy(
        str(template_repo), tmp_path / "fresh", data={"backend_name": NAME}, vcs_ref="v0.9.0", defaults=True, quiet=True
    )
    assert moved == (Path(fresh.dst_path) / "tests" / "test_elementwise.py").read_text()
    assert_nothing_in_conflict(project)


def test_update_can_turn_features_off_and_on(template_repo, tmp_path):
    project = generate(template_repo, tmp_path / "project", "v0.9.0")
    package = project / f"torch_{NAME}"
    with (project / "README.md").open("a") as readme:
        readme.write(USER_README)
    with (package / "__init__.py").open("a") as init:
        init.write(USER_INIT)
    commit_all(project, "Our changes")

    # A project of a preset other than custom changes single features with preset=custom: copier
    # gives the new release's render no answer of a question it did not ask (docs/questions.md).
    update(project, "v0.9.0", preset="custom", benchmarks=False, ci="none", custom_op=False, opinfo_tests=False)
    assert not (project / "benchmarks").exists() and not (project / ".github").exists()
    assert not (project / "csrc" / "custom_ops").exists() and not (package / "ops.py").exists()
    assert not (project / "tests" / "test_custom_ops.py").exists()
    assert not (project / "tests" / "test_opinfo.py").exists()
    init = (package / "__init__.py").read_text()
    assert "from .ops import" not in init and USER_INIT in init, "the import goes, the user's lines stay"
    readme = (project / "README.md").read_text()
    assert "`benchmarks/bench_ops.py`" not in readme and USER_README in readme
    assert (
        "bias_gelu" not in readme
        and "expecttest" not in readme
        and "expecttest" not in (project / "pyproject.toml").read_text()
    )
    assert_nothing_in_conflict(project)
    commit_all(project, "No benchmarks, no CI, no example operator, no OpInfo tests")

    update(project, "v0.9.0", benchmarks=True, ci="github", custom_op=True, opinfo_tests=True)
    assert (project / "benchmarks" / "bench_ops.py").exists()
    assert (project / ".github" / "workflows" / "ci.yml").exists()
    assert (project / "csrc" / "custom_ops" / "CustomOps.cpp").exists() and (package / "ops.py").exists()
    assert (project / "tests" / "test_custom_ops.py").exists() and (project / "tests" / "test_opinfo.py").exists()
    init = (package / "__init__.py").read_text()
    assert "from .ops import bias_gelu" in init and USER_INIT in init
    compile(init, "__init__.py", "exec")
    readme = (project / "README.md").read_text()
    assert "`benchmarks/bench_ops.py`" in readme and "`csrc/custom_ops/CustomOps.cpp`" in readme
    assert USER_README in readme
    assert_nothing_in_conflict(project)


def test_update_keeps_the_features_of_a_project_from_before_presets(template_repo, tmp_path):
    """A project whose answers file has no `preset` (generated before the question existed) and a
    feature off keeps that feature off through an update; the preset then changes every feature."""
    project = generate(template_repo, tmp_path / "project", "v0.1.0", distributed=False)
    answers_file = project / ".copier-answers.yml"
    answers = yaml.safe_load(answers_file.read_text())
    assert answers["preset"] == "custom" and answers["distributed"] is False and answers["compile"] is True
    # As a release before `preset`, `compile`, `profiler`, `kernel_families`, `graphs` and
    # `native_operators` wrote it (their files were in every project then).
    for name in ("preset", "compile", "profiler", "kernel_families", "graphs", "native_operators"):
        del answers[name]
    answers_file.write_text(yaml.safe_dump(answers))
    commit_all(project, "Answers of an older release")

    update(project, "v0.9.0")
    answers = yaml.safe_load(answers_file.read_text())
    assert answers["preset"] == "custom" and answers["distributed"] is False and answers["compile"] is True
    assert answers["native_operators"] is True and (project / "csrc" / "aten" / "Blas.cpp").is_file()
    assert not (project / "csrc" / "distributed").exists() and (project / "csrc" / "compile").is_dir()
    assert answers["graphs"] is True and (project / "csrc" / "core" / "Graph.cpp").is_file(), "graphs stay"
    assert_nothing_in_conflict(project)
    commit_all(project, "Updated")

    update(project, "v0.9.0", preset="minimal")
    answers = yaml.safe_load(answers_file.read_text())
    assert answers["preset"] == "minimal" and not any(answers[name] for name in ("compile", "profiler", "benchmarks"))
    assert not (project / "csrc" / "compile").exists() and not (project / "benchmarks").exists()
    assert answers["graphs"] is False and not (project / "csrc" / "core" / "Graph.cpp").exists()
    assert answers["native_operators"] is False and not (project / "csrc" / "aten" / "Blas.cpp").exists()
    assert (project / ".github" / "workflows" / "ci.yml").exists(), "minimal keeps the CI workflow"
    assert_nothing_in_conflict(project)
    commit_all(project, "Minimal")

    update(project, "v0.9.0", preset="full")
    answers = yaml.safe_load(answers_file.read_text())
    assert answers["preset"] == "full" and answers["distributed"] is True
    assert (project / "csrc" / "distributed").is_dir() and (project / "csrc" / "profiler").is_dir()
    assert_nothing_in_conflict(project)


def test_update_moves_a_project_across_the_supported_torch_releases(template_repo, tmp_path):
    """From the oldest supported release to the newest, with the user's edits kept; an answers file
    from before the question (no torch_version) takes the default release."""
    oldest, newest = facts.torch_releases()[-1], facts.torch_releases()[0]
    project = generate(template_repo, tmp_path / "project", "v0.9.0", torch_version=oldest)
    with (project / "README.md").open("a") as readme:
        readme.write(USER_README)
    commit_all(project, "Our changes")

    def pins() -> set[str]:
        workflow = (project / ".github" / "workflows" / "ci.yml").read_text()
        readme = (project / "README.md").read_text()
        pyproject = (project / "pyproject.toml").read_text()
        found = {line.split("torch==")[1].split()[0] for line in (workflow + readme).splitlines() if "torch==" in line}
        found |= {line.split("torch>=")[1].split('"')[0] for line in pyproject.splitlines() if "torch>=" in line}
        return found

    answers_file = project / ".copier-answers.yml"
    assert pins() == {oldest, ".".join(oldest.split(".")[:2])}
    update(project, "v0.9.0", torch_version=newest)
    assert yaml.safe_load(answers_file.read_text())["torch_version"] == newest
    assert pins() == {newest, ".".join(newest.split(".")[:2])}
    assert USER_README in (project / "README.md").read_text(), "the user's README section was lost"
    assert_nothing_in_conflict(project)
    commit_all(project, f"torch {newest}")

    answers = yaml.safe_load(answers_file.read_text())
    del answers["torch_version"]  # as a release before the question wrote it
    answers_file.write_text(yaml.safe_dump(answers))
    commit_all(project, "Answers of an older release")
    update(project, "v0.9.0")
    assert yaml.safe_load(answers_file.read_text())["torch_version"] == facts.torch_version()
    assert_nothing_in_conflict(project)


def test_overlapping_edits_of_a_moved_file_are_marked_as_conflicts(template_repo, tmp_path, capfd):
    project = generate(template_repo, tmp_path / "project", "v0.1.0")
    # The user edits the first line, where v0.9.0 also adds a line: both changed the same place.
    ops = project / "tests" / "test_ops.py"
    ops.write_text("# Our kernels' tests.\n" + ops.read_text())
    commit_all(project, "Our header")

    update(project, "v0.9.0")

    moved = (project / "tests" / "test_elementwise.py").read_text()
    assert "<<<<<<< new template" in moved and ">>>>>>> your edits" in moved
    assert "# Our kernels' tests." in moved and "# Elementwise kernels against the CPU" in moved
    assert "1 conflict(s) marked in tests/test_elementwise.py" in capfd.readouterr().err
    assert not (project / "tests" / "test_ops.py").exists()


def released_template(tmp_path: Path, tag: str, this_release: str) -> Path:
    """A template repository with the earlier release `tag` (RELEASES) and this working tree on top
    of it as `this_release`."""
    commit = RELEASES[tag]
    present = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True)
    assert present.returncode == 0, f"the history of this repository must contain {tag} ({commit}); clone it whole"
    repo = tmp_path / "template"
    repo.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(repo)], input=archive, check=True)
    git(repo.parent, "init", "-q", "-b", "main", repo.name)
    release(repo, tag, f"Release {tag}")
    for path in list(repo.iterdir()):
        if path.name != ".git":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    files = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for relative in files:
        source = ROOT / relative
        if relative and source.is_file() and not relative.startswith("example_generated/"):
            (repo / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / relative)
    release(repo, this_release, "This release")
    return repo


def fresh_render(repo: Path, dest: Path, ref: str, **answers) -> Path:
    """A render of release `ref` with the test's name and `answers`, to compare an updated project with."""
    data = {"backend_name": NAME, **answers}
    return Path(run_copy(str(repo), dest, data=data, vcs_ref=ref, defaults=True, quiet=True, unsafe=True).dst_path)


def files_of(project: Path) -> set[Path]:
    return {p.relative_to(project) for p in project.rglob("*") if p.is_file() and ".git" not in p.parts}


def test_update_of_a_project_on_a_retired_torch_release(tmp_path, capfd):
    """A project pinned to a torch release that left copier/torch.yml: the update stops before it
    changes anything and says how to stay (the last template release for it, which still updates)
    or move; moving with --data torch_version keeps the user's edits."""
    retired = facts.retired_torch_releases()
    if not retired:
        pytest.skip("copier/torch.yml retires no release")
    release_name, last_tag = next(iter(retired.items()))
    repo = released_template(tmp_path, last_tag, "v0.3.0")
    project = generate(repo, tmp_path / "project", last_tag, torch_version=release_name)
    with (project / "README.md").open("a") as readme:
        readme.write(USER_README)
    commit_all(project, "Our changes")
    head = git(project, "rev-parse", "HEAD")
    answers_file = project / ".copier-answers.yml"

    capfd.readouterr()
    with pytest.raises(TaskError):  # the migration check-torch exited 1
        update(project, "v0.3.0")
    message = capfd.readouterr().err
    assert f"torch {release_name} is no longer supported" in message and "nothing was changed" in message
    assert f"copier update --vcs-ref {last_tag}" in message
    assert f"copier update --data torch_version={facts.torch_version()}" in message
    assert git(project, "rev-parse", "HEAD") == head and not git(project, "status", "--porcelain")
    assert yaml.safe_load(answers_file.read_text())["torch_version"] == release_name

    # Staying: the last release for it still updates the project (here: to itself).
    update(project, last_tag)
    answers = yaml.safe_load(answers_file.read_text())
    assert answers["torch_version"] == release_name and answers["_commit"] == last_tag

    # Moving: the update names a supported release.
    update(project, "v0.3.0", torch_version=facts.torch_version())
    answers = yaml.safe_load(answers_file.read_text())
    assert answers["torch_version"] == facts.torch_version() and answers["_commit"] == "v0.3.0"
    assert f"torch=={facts.torch_version()}" in (project / "README.md").read_text()
    assert USER_README in (project / "README.md").read_text(), "the user's README section was lost"
    assert_nothing_in_conflict(project)


def test_update_from_the_previous_release(tmp_path):
    """A project generated from the last release, edited by its user (the README, a test, and the
    driver, which this release split into files), takes this release: the edits of files that stay
    survive, the edited driver file that went is kept as .orig beside its replacements, and every
    other file equals a fresh render."""
    tag = PREVIOUS_RELEASE[0]
    repo = released_template(tmp_path, tag, "v0.2.0")
    project = generate(repo, tmp_path / "project", tag)
    runtime = project / "csrc" / "runtime" / "runtime.cpp"
    assert runtime.exists(), f"{tag} had the driver in one file"
    with (project / "README.md").open("a") as readme:
        readme.write(USER_README)
    with (project / "tests" / "test_ops.py").open("a") as tests:
        tests.write(USER_TEST)
    runtime.write_text(runtime.read_text() + "\n// Our lab's driver notes.\n")
    commit_all(project, "Our changes")

    update(project, "v0.2.0")

    assert USER_README in (project / "README.md").read_text()
    assert USER_TEST in (project / "tests" / "test_ops.py").read_text()
    kept = project / "csrc" / "runtime" / "runtime.cpp.orig"
    assert not runtime.exists() and "// Our lab's driver notes." in kept.read_text()
    fresh = fresh_render(repo, tmp_path / "fresh", "v0.2.0")
    expected, actual = files_of(fresh), files_of(project)
    assert actual - expected == {Path("csrc/runtime/runtime.cpp.orig")}
    assert expected - actual == set()
    edited = {Path("README.md"), Path("tests/test_ops.py"), Path(".copier-answers.yml")}
    for relative in expected - edited:
        assert (project / relative).read_bytes() == (fresh / relative).read_bytes(), f"{relative} differs"


# A user's edits of the two core files that this release restructured most (the allocator, whose
# features moved out of its body, and the fallback, which no longer includes the kernel families):
# each replaces one line of code that stays, so the three-way merge applies it to the new file.
USER_CORE_EDITS = {
    "csrc/core/BlockCache.cpp": (
        "  return (n + multiple - 1) / multiple * multiple;\n",
        "  // Our lab: the hardware's DMA wants every block on its own multiple of the request rounding.\n"
        "  return (n + multiple - 1) / multiple * multiple;\n",
    ),
    "csrc/aten/Fallback.cpp": (
        "  return c10::Device(c10::DeviceType::PrivateUse1, current_device());\n",
        "  // Our lab: operators without a device argument run on the current device, as CUDA's do.\n"
        "  return c10::Device(c10::DeviceType::PrivateUse1, current_device());\n",
    ),
}


def test_update_from_the_last_release_keeps_edits_of_restructured_core_files(tmp_path):
    """A project generated from the last release (v0.2.0), whose user edited the allocator and the
    fallback, takes this release: the edits survive in those files, nothing is left in conflict,
    and every other file equals a fresh render of this release (so the moved-files map of the
    CHANGELOG's release and the `_migrations` entries brought every moved file along)."""
    tag = "v0.2.0"
    repo = released_template(tmp_path, tag, "v0.3.0")
    project = generate(repo, tmp_path / "project", tag)
    for relative, (line, edited) in USER_CORE_EDITS.items():
        path = project / relative
        assert path.read_text().count(line) == 1, f"{tag}'s {relative} changed: pick another line to edit"
        path.write_text(path.read_text().replace(line, edited))
    commit_all(project, "Our allocator and fallback changes")

    update(project, "v0.3.0")

    assert_nothing_in_conflict(project)
    for relative, (_, edited) in USER_CORE_EDITS.items():
        assert edited in (project / relative).read_text(), f"the user's edit of {relative} was lost"
    # The project keeps the torch release it was pinned to (the last release's default) while this
    # release supports it: the fresh render answers the same.
    pinned = yaml.safe_load((project / ".copier-answers.yml").read_text())["torch_version"]
    fresh = fresh_render(repo, tmp_path / "fresh", "v0.3.0", torch_version=pinned)
    expected, actual = files_of(fresh), files_of(project)
    assert actual == expected
    edited = {Path(relative) for relative in USER_CORE_EDITS} | {Path(".copier-answers.yml")}
    for relative in expected - edited:
        assert (project / relative).read_bytes() == (fresh / relative).read_bytes(), f"{relative} differs"
    for relative, (line, edited_text) in USER_CORE_EDITS.items():
        mine = (project / relative).read_text()
        assert mine.replace(edited_text, line) == (fresh / relative).read_text(), (
            f"{relative}: more than the edit differs"
        )

"""One source per fact. The supported torch releases live in copier/torch.yml and the device limit in copier.yml
(max_device_count): copier.yml, the Makefile and the template read them, the docs include what the
template renders, and every copy kept by hand is compared with its source here. The generated
README's table of environment variables is the only such table, and it lists every variable the
generated code reads."""

import json
import os
import re
import shutil
import subprocess

import pytest
from copier import run_copy

import facts
from conftest import ROOT

# A pin such as torch==2.14.1; `TORCH_SPEC=torch==X` is an example of choosing another torch.
PIN = re.compile(r"(?<!TORCH_SPEC=)\btorch==([0-9][\w.+-]*)")
# Kept by hand and allowed to name other releases: history, and the files that are the source.
NOT_CHECKED = {"CHANGELOG.md", "copier/torch.yml"}


def hand_written_files() -> list[str]:
    """Files of this repository that people write (tracked or new, not ignored, not the example)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [
        path
        for path in listed
        if not path.startswith("example_generated/") and path not in NOT_CHECKED and (ROOT / path).is_file()
    ]


def text_of(path) -> str:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        return ""


def test_every_torch_pin_is_a_release_of_copier_torch_yml():
    wrong = []
    for path in hand_written_files():
        for number, line in enumerate(text_of(ROOT / path).splitlines(), 1):
            for version in PIN.findall(line):
                if version not in facts.torch_releases():
                    wrong.append(f"{path}:{number}: torch=={version}")
    releases = ", ".join(facts.torch_releases())
    assert not wrong, f"copier/torch.yml supports torch {releases}, but:\n" + "\n".join(wrong)


def test_the_default_release_is_supported_and_the_list_is_newest_first():
    releases = facts.torch_releases()
    assert facts.torch_version() in releases
    numbers = [tuple(int(part) for part in release.split(".")) for release in releases]
    assert numbers == sorted(set(numbers), reverse=True), f"copier/torch.yml: {releases} is not newest first"


def test_each_retired_release_names_a_template_release_that_supports_it():
    """copier/torch.yml's `retired`: a release leaves the list for good, and the template release that
    users who stay on it pin is a CHANGELOG release that tests/test_update.py can check out."""
    from test_update import RELEASES

    changelog = (ROOT / "CHANGELOG.md").read_text()
    for release, tag in facts.retired_torch_releases().items():
        assert release not in facts.torch_releases(), f"torch {release} is both supported and retired"
        assert re.fullmatch(r"v\d+\.\d+\.\d+", tag), tag
        assert f"\n## [{tag[1:]}]" in changelog, f"CHANGELOG.md has no release {tag} (the last for torch {release})"
        assert tag in RELEASES, f"tests/test_update.py's RELEASES lacks the commit of {tag}"


def test_the_makefile_knows_every_supported_release():
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", "torch-releases"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == facts.torch_releases(), result.stderr


def test_the_makefile_installs_the_pinned_torch():
    # Neither a TORCH_SPEC of the caller nor the flags of a make that runs this test apply.
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_SPEC", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", "torch-spec"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == facts.torch_spec()


def test_reserved_names_cover_every_supported_release():
    listed = [str(part["torch_version"]) for part in facts.copier_config()["reserved"]["default"]]
    assert listed == facts.torch_releases(), (
        f"copier/reserved_names.yml has parts for torch {listed}, copier/torch.yml supports {facts.torch_releases()}: "
        "run scripts/update_reserved_names.py in an environment of each release"
    )


@pytest.mark.parametrize("version", facts.torch_releases())
def test_a_render_pins_the_torch_it_was_asked_for(render, version):
    project = render("npu", torch_version=version)
    minor = ".".join(version.split(".")[:2])
    readme = (project / "README.md").read_text()
    assert f"pip install torch=={version} " in readme
    assert f"torch {minor} " in readme
    assert f"TORCH_SPEC: torch=={version}\n" in (project / ".github" / "workflows" / "ci.yml").read_text()
    assert f'dependencies = ["torch>={minor}"]' in (project / "pyproject.toml").read_text()
    pins = {pin for path in project.rglob("*") if path.is_file() for pin in PIN.findall(text_of(path))}
    assert pins == {version}


def test_the_message_after_copy_pins_the_same_torch(tmp_path, capsys):
    run_copy(str(ROOT), str(tmp_path / "npu"), data={"backend_name": "npu"}, defaults=True, unsafe=True, vcs_ref="HEAD")
    assert f"pip install {facts.torch_spec()} " in capsys.readouterr().err


def _limit_statements(text: str) -> list[tuple[int, str]]:
    """(limit, line) for each "0 to N" / "1 to N" range stated on a line about the device count.
    Inline code is not a statement: it quotes messages of a run with some device count."""
    found = []
    for line in text.splitlines():
        prose = re.sub(r"`[^`]*`", "", line)
        if re.search(r"DEVICE_COUNT|device_count|devices", prose):
            found += [(int(limit), line.strip()) for limit in re.findall(r"\b[01] to (\d+)\b", prose)]
    return found


def test_the_docs_state_the_device_limit_of_copier_yml():
    limit = facts.max_device_count()
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    wrong = [
        f"{page.relative_to(ROOT)}: {line}"
        for page in pages
        for stated, line in _limit_statements(page.read_text())
        if stated != limit
    ]
    assert not wrong, f"copier.yml's max_device_count is {limit}, but:\n" + "\n".join(wrong)


def test_the_device_limit_is_rendered_from_copier_yml(tmp_path):
    """A template whose max_device_count is 7 renders a project in which nothing about devices says
    16 any more: every file that needs the limit reads the computed value."""
    template = tmp_path / "template-copy"
    template.mkdir()
    for name in ("copier", "template"):
        shutil.copytree(ROOT / name, template / name)
    config = (ROOT / "copier.yml").read_text()
    changed = re.sub(r"(max_device_count:\n(?:  .*\n)*?  default: )\d+", r"\g<1>7", config)
    assert changed != config, "copier.yml has no max_device_count default"
    (template / "copier.yml").write_text(changed)
    project = tmp_path / "npu"
    run_copy(str(template), str(project), data={"backend_name": "npu"}, defaults=True, unsafe=True, quiet=True)
    readme = (project / "README.md").read_text()
    assert "0 to 7" in readme
    old = str(facts.max_device_count())
    stale = [
        f"{path.relative_to(project)}: {line.strip()}"
        for path in sorted(project.rglob("*"))
        if path.is_file()
        for line in text_of(path).splitlines()
        if re.search(rf"\b{old}\b", line) and re.search("devices|device_count|device count", line, re.IGNORECASE)
    ]
    assert not stale, f"these lines still state the device limit {old} instead of reading max_device_count:\n" + (
        "\n".join(stale)
    )


def _configuration_table(readme: str) -> str:
    start = readme.index("--8<-- [start:configuration]")
    return readme[start : readme.index("--8<-- [end:configuration]")]


def test_the_readme_lists_every_environment_variable_the_backend_reads(render):
    project = render("my_accel")
    reads = re.compile(r"""(?:getenv|environ\.get|environ\.setdefault|environ\[)\(?\s*["'](MY_ACCEL_[A-Z0-9_]+)["']""")
    read = {
        variable
        for path in project.rglob("*")
        if path.suffix in (".py", ".cpp", ".h")
        for variable in reads.findall(text_of(path))
    }
    assert {"MY_ACCEL_DEVICE_COUNT", "MY_ACCEL_STRICT_MEMORY"} <= read, "the search for variables found too little"
    table = _configuration_table((project / "README.md").read_text())
    listed = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", table, re.MULTILINE))
    assert read - listed == set(), f"README.md's configuration table misses {sorted(read - listed)}"
    assert {v for v in listed if v.startswith("MY_ACCEL_")} <= read, "the table lists variables nothing reads"


def test_the_docs_have_no_table_of_environment_variables_of_their_own():
    """The docs include the generated README's table (docs/getting-started.md) instead of a copy."""
    row = re.compile(r"^\| `(?:FOO|NPU|<NAME>|MY_ACCEL)_[A-Z0-9_]+` \|", re.MULTILINE)
    copies = [str(page.relative_to(ROOT)) for page in (ROOT / "docs").rglob("*.md") if row.search(page.read_text())]
    assert not copies, f"tables of environment variables outside the generated README: {copies}"
    assert '--8<-- "example_generated/README.md:configuration"' in (ROOT / "docs" / "getting-started.md").read_text()


# --- The figures the docs state: generated by `python scripts/facts.py --write` (docs/snippets/).


def test_the_generated_figures_are_current():
    """docs/snippets/ and README.md's marked figures are what `scripts/facts.py --write` writes from the
    stored counts, copier/torch.yml and docs/snippets/measured.yml."""
    stale = facts.stale_files()
    assert not stale, f"stale: {stale}: run python scripts/facts.py --write"


@pytest.mark.parametrize("label", list(facts.COUNTED_RENDERS))
def test_the_stored_line_counts_are_those_of_the_template(label, tmp_path):
    stored = json.loads(facts.COUNTS.read_text())
    assert set(stored) == set(facts.COUNTED_RENDERS), "run python scripts/facts.py --write"
    counted = facts.count_render(label, tmp_path / "acme")
    assert counted == stored[label], f"{label}: the template changed: run python scripts/facts.py --write"


def test_line_counts_count_what_the_docs_say(tmp_path):
    (tmp_path / "csrc" / "runtime" / "emulated").mkdir(parents=True)
    (tmp_path / "csrc" / "runtime" / "emulated" / "a.cpp").write_text("1\n2\n")
    (tmp_path / "csrc" / "core.h").write_text("1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("1\n2\n3")  # the last line without a newline counts
    (tmp_path / "CMakeLists.txt").write_text("1\n")
    (tmp_path / "cmake").mkdir()
    (tmp_path / "cmake" / "flags.cmake").write_text("1\n")
    for skipped in ("tests", "benchmarks", "examples", "build", ".github"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "x.py").write_text("1\n")
    (tmp_path / "README.md").write_text("1\n")
    assert facts.line_counts(tmp_path) == {"total": 8, "cpp": 3, "python": 3, "cmake": 2, "emulated": 2}


def test_each_measured_figure_says_how_it_was_measured():
    for name, figure in facts.measured().items():
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(figure["date"])), name
        assert figure["command"] and figure["machine"] and figure["text"], name
        known = subprocess.run(["git", "cat-file", "-e", f"{figure['commit']}^{{commit}}"], cwd=ROOT)
        assert known.returncode == 0, f"{name}: no commit {figure['commit']}"


def test_every_generated_figure_is_used():
    """Each section of a generated snippet is included by a page or marks README.md's text."""
    pages = "\n".join(page.read_text() for page in (ROOT / "docs").rglob("*.md"))
    readme = facts.README.read_text()
    unused = []
    for snippet in sorted(facts.SNIPPETS.glob("*.md")):
        for name in re.findall(r"--8<-- \[start:(\w+)\]", snippet.read_text()):
            include = f'--8<-- "docs/snippets/{snippet.name}:{name}"'
            if include not in pages and f"<!-- facts:{name} -->" not in readme:
                unused.append(f"{snippet.name}:{name}")
    assert not unused, f"generated but never included: {unused}"

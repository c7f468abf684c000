"""The facts the template states once, read the way copier reads them, for scripts and tests.

- the torch releases the template supports, and the default one: ``copier/torch.yml``
  (copier.yml offers them as the answers of ``torch_version``; the Makefile reads them too);
- the computed values of ``copier.yml`` (``max_device_count``, the names derived from a device name).

Everything else that states one of these facts either renders it from copier.yml, includes it (the
docs include generated files with snippets), or is compared with it by ``tests/test_facts.py``.

The figures the docs and the README state are generated, not retyped: ``--write`` writes them into
``docs/snippets/`` (which the pages include with pymdownx.snippets) and between ``<!-- facts:NAME -->``
markers of README.md, which cannot include:

- computed from renders of the working tree (``line_counts``): the lines of each preset and what each
  feature adds, stored in ``docs/snippets/counts.json`` (tests/test_facts.py renders again and compares);
- the supported torch releases, from ``copier/torch.yml``;
- measured on a machine (build and test times), which no test can recompute: kept in
  ``docs/snippets/measured.yml`` with the command, the date and the commit of each measurement.

    python scripts/facts.py             print the facts
    python scripts/facts.py --write     render the counts again and regenerate every snippet (after a change
                                        of the template, or of measured.yml)
    python scripts/facts.py --check     exit 1 naming each generated file that is stale (no render)
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


class _CopierLoader(yaml.SafeLoader):
    """copier.yml's YAML: ``!include PATH`` reads PATH (relative to the repository) as a list of
    its documents, as copier does."""


def _include(loader: yaml.SafeLoader, node: yaml.Node) -> list:
    path = ROOT / loader.construct_scalar(node)
    return [doc for doc in yaml.load_all(path.read_text(), Loader=_CopierLoader) if doc is not None]


_CopierLoader.add_constructor("!include", _include)


@functools.cache
def copier_config() -> dict:
    """copier.yml with its includes read, as one mapping of settings and questions."""
    return yaml.load((ROOT / "copier.yml").read_text(), Loader=_CopierLoader)


def torch_releases() -> list[str]:
    """The torch releases the template supports, newest first, e.g. ["2.15.0", "2.14.1"]."""
    return [str(release) for release in copier_config()["torch"]["default"][0]["releases"]]


def torch_version() -> str:
    """The default answer of torch_version: the release the example pins and `make` installs."""
    return str(copier_config()["torch"]["default"][0]["default"])


def retired_torch_releases() -> dict[str, str]:
    """The releases that left the list -> the last template release (git tag) that supports each."""
    retired = copier_config()["torch"]["default"][0].get("retired") or {}
    return {str(release): str(tag) for release, tag in retired.items()}


def other_torch_releases() -> list[str]:
    """The supported releases other than the default, newest first."""
    return [release for release in torch_releases() if release != torch_version()]


def torch_spec(release: str | None = None) -> str:
    """The pip requirement that installs `release` (default: the default release)."""
    return f"torch=={release or torch_version()}"


def max_device_count() -> int:
    """How many devices the emulated runtime supports at most."""
    return int(copier_config()["max_device_count"]["default"])


def derived_names(backend_name: str) -> dict[str, str]:
    """The names copier.yml computes from a device name (package_name, runtime_prefix, ...),
    rendered from copier.yml's own expressions."""
    import jinja2

    env = jinja2.Environment()
    config = copier_config()
    names = {"backend_name": backend_name}
    context = {"reserved": config["reserved"]["default"]}  # names torch uses (ccl_name avoids them)
    for key, spec in config.items():
        if isinstance(spec, dict) and spec.get("when") is False and spec.get("type") == "str":
            default = spec.get("default")
            if isinstance(default, str) and "backend_name" in default:
                names[key] = env.from_string(default).render(**context, **names)
    return names


# --- Generated figures -------------------------------------------------------------------------------

SNIPPETS = ROOT / "docs" / "snippets"
COUNTS = SNIPPETS / "counts.json"
MEASURED = SNIPPETS / "measured.yml"
README = ROOT / "README.md"
# The name the counted renders use (the docs' commands run in a render for it).
COUNT_NAME = "acme"
# What is counted: C++, Python and CMake outside the render's tests/, benchmarks/ and examples/; the
# emulated device is what a port replaces with its driver and kernels.
NOT_COUNTED = ("tests", "benchmarks", "examples")
EMULATED = ("csrc/runtime/emulated", "csrc/kernels/emulated")
# The features whose share of the full preset the docs state, each counted as the full preset without it.
COUNTED_FEATURES = ("profiler", "kernel_families", "graphs", "native_operators", "backend_meta")
# The renders counted: label -> answers (besides the device name).
COUNTED_RENDERS = {
    "full": {},
    "minimal": {"preset": "minimal"},
    **{f"full without {feature}": {feature: False} for feature in COUNTED_FEATURES},
}


def _language(path: Path) -> str | None:
    if path.suffix in (".cpp", ".h"):
        return "cpp"
    if path.suffix == ".py":
        return "python"
    if path.name == "CMakeLists.txt" or path.suffix == ".cmake":
        return "cmake"
    return None


def line_counts(project: Path) -> dict[str, int]:
    """Lines of a render: total, per language (cpp, python, cmake) and of the emulated device."""
    counts = {"total": 0, "cpp": 0, "python": 0, "cmake": 0, "emulated": 0}
    for path in sorted(project.rglob("*")):
        relative = path.relative_to(project)
        if relative.parts[0] in NOT_COUNTED or relative.parts[0].startswith(".") or relative.parts[0] == "build":
            continue
        language = _language(path)
        if language is None or not path.is_file():
            continue
        lines = len(path.read_bytes().splitlines())
        counts["total"] += lines
        counts[language] += lines
        if any(relative.as_posix().startswith(f"{prefix}/") for prefix in EMULATED):
            counts["emulated"] += lines
    return counts


def count_render(label: str, where: Path) -> dict[str, int]:
    """Renders the working tree with the answers of COUNTED_RENDERS[label] into `where` and counts it."""
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    import project

    return line_counts(project.render(where, {"backend_name": COUNT_NAME, **COUNTED_RENDERS[label]}))


def measure_counts() -> dict[str, dict[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        return {label: count_render(label, Path(tmp) / str(i)) for i, label in enumerate(COUNTED_RENDERS)}


def measured() -> dict[str, dict]:
    """docs/snippets/measured.yml: figure -> {text, command, date, commit, machine}."""
    return yaml.safe_load(MEASURED.read_text())


def _n(number: int) -> str:
    return f"{number:,}"


def _about(number: int) -> str:
    return _n(round(number, -1))


def _section(name: str, text: str) -> str:
    return f"--8<-- [start:{name}]\n{text.rstrip()}\n--8<-- [end:{name}]\n"


GENERATED = "<!-- Generated by `python scripts/facts.py --write` from {source}: do not edit. -->\n"


def lines_snippet(counts: dict[str, dict[str, int]]) -> str:
    full, minimal = counts["full"], counts["minimal"]
    share = round(100 * minimal["total"] / full["total"])
    kept_full, kept_minimal = full["total"] - full["emulated"], minimal["total"] - minimal["emulated"]
    presets = (
        "| Preset | Lines | Of which the emulated device (`csrc/runtime/emulated/`, `csrc/kernels/emulated/`), "
        "which a port replaces with its driver and kernels |\n"
        "| --- | --- | --- |\n"
        f"| `full` | {_n(full['total'])} | {_n(full['emulated'])} |\n"
        f"| `minimal` | {_n(minimal['total'])} ({share}% of `full`) | {_n(minimal['emulated'])} |\n\n"
        f"What a port keeps, everything but the emulated device, is then {_n(kept_full)} lines in `full` and "
        f"{_n(kept_minimal)} in `minimal` ({round(100 * kept_minimal / kept_full)}%)."
    )
    cut = {feature: full["total"] - counts[f"full without {feature}"]["total"] for feature in COUNTED_FEATURES}
    named = {
        "profiler": "`profiler` (with memory history and monitoring)",
        "kernel_families": "`kernel_families` (with sparse tensors and the fused recurrent cells)",
        "graphs": "`graphs`",
        "native_operators": "`native_operators` (with activations, optimizer updates and gradient scaling)",
        "backend_meta": "`backend_meta`",
    }
    rest = full["total"] - minimal["total"] - sum(cut.values())
    features = (
        "The features' shares of the cut, in lines, each counted as `full` without it: "
        + ", ".join(f"{named[feature]} about {_about(lines)}" for feature, lines in cut.items())
        + f"; the other features (`compile`, `distributed`, `custom_op`) and the code features share the "
        f"remaining {_about(rest)}."
    )
    without = counts["full without graphs"]
    graphs = (
        f"Turning graphs off takes the `full` preset from {_n(full['total'])} to {_n(without['total'])} lines "
        f"(C++ {_n(full['cpp'])} to {_n(without['cpp'])}, Python {_n(full['python'])} to {_n(without['python'])})."
    )
    readme = f"{_n(minimal['total'])} lines of C++, Python and CMake against {_n(full['total'])}, {share}%"
    return (
        GENERATED.format(source="docs/snippets/counts.json")
        + _section("presets", presets)
        + _section("features", features)
        + _section("graphs", graphs)
        + _section("readme", readme)
    )


def torch_snippet() -> str:
    releases = torch_releases()
    listed = ", ".join(releases[:-1]) + f" and {releases[-1]}" if len(releases) > 1 else releases[0]
    return GENERATED.format(source="copier/torch.yml") + _section("supported", listed)


def measured_snippet() -> str:
    sections = []
    for name, figure in measured().items():
        missing = {"text", "command", "date", "commit", "machine"} - figure.keys()
        if missing:
            raise ValueError(f"{MEASURED.relative_to(ROOT)}: {name} lacks {', '.join(sorted(missing))}")
        sections.append(
            _section(
                name,
                f"{figure['text']} (measured on {figure['machine']} on {figure['date']}, at {figure['commit']}: "
                f"`{figure['command']}`).",
            )
        )
    return GENERATED.format(source="docs/snippets/measured.yml") + "".join(sections)


def snippet_section(text: str, name: str) -> str:
    match = re.search(rf"--8<-- \[start:{name}\]\n(.*?)\n--8<-- \[end:{name}\]", text, re.S)
    if match is None:
        raise KeyError(name)
    return match.group(1)


README_MARKER = re.compile(r"(<!-- facts:(\w+) -->)(.*?)(<!-- /facts -->)", re.S)


def readme_text(readme: str, lines: str) -> str:
    """README.md with each `<!-- facts:NAME -->...<!-- /facts -->` holding section NAME of the line counts."""

    def replace(match: re.Match) -> str:
        return f"{match.group(1)}{snippet_section(lines, match.group(2))}{match.group(4)}"

    return README_MARKER.sub(replace, readme)


def generated_files(counts: dict[str, dict[str, int]]) -> dict[Path, str]:
    """Every file --write writes, with its content, from the stored or the given counts."""
    lines = lines_snippet(counts)
    return {
        COUNTS: json.dumps(counts, indent=2, sort_keys=True) + "\n",
        SNIPPETS / "lines.md": lines,
        SNIPPETS / "torch.md": torch_snippet(),
        SNIPPETS / "measured.md": measured_snippet(),
        README: readme_text(README.read_text(), lines),
    }


def stale_files() -> list[str]:
    """The generated files that differ from what --write would write with the stored counts."""
    counts = json.loads(COUNTS.read_text())
    return [
        str(path.relative_to(ROOT))
        for path, text in generated_files(counts).items()
        if not path.exists() or path.read_text() != text
    ]


def write() -> None:
    SNIPPETS.mkdir(exist_ok=True)
    for path, text in generated_files(measure_counts()).items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="render, count and regenerate every snippet")
    action.add_argument("--check", action="store_true", help="name the stale generated files (exit 1)")
    args = parser.parse_args()
    if args.write:
        write()
    elif args.check:
        stale = stale_files()
        print("\n".join(f"stale: {path} (python scripts/facts.py --write)" for path in stale) or "up to date")
        return 1 if stale else 0
    else:
        print(f"torch: {torch_spec()} (supported: {', '.join(torch_releases())})")
        print(f"max_device_count: {max_device_count()}")
        for key, value in derived_names("my_accel").items():
            print(f"{key} (for my_accel): {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

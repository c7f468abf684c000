"""Feature choices (copier/features.yml): every class of combination (everything, minimal, each option
off, alone or in its `off_group`) renders what it promises, passes the generated project's formatters
and linters, and builds and passes its own test suite (tests/test_build.py). Variants whose compiled
code and tests are identical share one test run (checks.test_inputs_digest); variants whose compiled
code is identical share one build and run their own tests against it (checks.build_inputs_digest); a
feature that changes C++ gets its own build.

What a render promises is read from copier/features.yml, the same list copier renders from: a
feature off leaves none of its paths, no CMake target of its directory and no file that names what
went; a feature on has every path (but those another feature off removes), its directory's target and
its test requirements."""

import re
from pathlib import Path

import pytest
import yaml

import checks
import features as feature_list
import format_template
import project
from conftest import ROOT

VARIANTS = checks.variants()
FEATURES = checks.FEATURE_LIST
PACKAGE = "torch_foo"  # the variants are rendered under the example's name here, whatever name they build under

# Names of the code a feature adds inside files that stay (C++ declarations, Python imports, CMake),
# which a render with the feature off must not contain anywhere (the sanitizers' suppression files
# aside: they name torch's own functions, which every project meets). Each must occur in the render
# with every feature on, so that a renamed symbol fails here instead of passing unnoticed.
SYMBOLS = {
    "custom_op": ("bias_gelu", "CustomOps", "from .ops", '"ops"'),
    "opinfo_tests": ("OPINFO", "torch.testing._internal", "expecttest"),
    "distributed": ("fooccl", "distributed/Bindings.h", "run_ranks", "CCL_CHECK"),
    "compile": ("CompiledKernels", "torch_dynamo_backends", "compiled_kernel", "_inductor"),
    "profiler": ("kineto", "REGISTER_PRIVATEUSE1_PROFILER", "MemoryHistory", "memory_history::")
    # The driver keeps the monitoring calls' types and its seam (driver.h) whatever the features;
    # the API, its implementation and the hook that measures busy time go.
    + ("CapturedTraceback", "DeviceGetMetric", "DeviceGetProcesses", "record_activity"),
    "kernel_families": ("WiderDtype", "run_widened", "OpAttention", "OpHistogram", "route_sparse_ops_to_fallback")
    + ("RecurrentCells", "OpLstmCell", "OpGruCell"),
    "native_operators": ("OpGemm", "OpConvolution", "OpSoftmax", "OpSum(", "OpSum,", "OpSum)", "OpPointwise")
    + ("OpUnscale", "OpUpdateScale", "host_math", "host_unary"),
    "backend_meta": ("BackendMeta", "backend metadata"),
    # Stream capture is part of the driver whatever the features (csrc/runtime/emulated/capture.cpp);
    # the graph API and objects go.
    "graphs": ("FooGraph", "graph_pool_handle", "StreamBeginCapture", "GraphLaunch", "GraphDebugDotPrint")
    + (
        "struct Graph ",
        "GraphImplInterface",
        "captures_into",
        "not_capturing_check = &",
        "is_current_stream_capturing",
    ),
}
# The files of each feature that the generated README's tables name (its integration points, its
# tests), exactly when the feature is on.
README_NAMES = {
    "benchmarks": ("benchmarks/bench_ops.py",),
    "ci": (".github/workflows/ci.yml",),
    "custom_op": ("csrc/custom_ops/CustomOps.cpp", f"{PACKAGE}/ops.py"),
    "opinfo_tests": ("tests/test_opinfo.py",),
    "distributed": ("csrc/distributed/Backend.cpp",),
    "compile": ("csrc/compile/CompiledKernels.cpp",),
    "profiler": ("csrc/profiler/KinetoSession.cpp",),
    "kernel_families": ("csrc/families/Attention.cpp", "csrc/families/Sparse.cpp"),
    "graphs": ("csrc/core/Graph.cpp",),
    "native_operators": ("csrc/aten/Blas.cpp", "csrc/aten/Softmax.cpp"),
}
# Files that name an absent feature's API on purpose: the CUDA parity table and its test list what
# the project lacks, and why.
LISTS_ABSENCE = {"graphs": {f"{PACKAGE}/_cuda_parity.py", "tests/test_cuda_parity.py"}}
# Files that stay and still name a file of a feature that is off, in a comment or a list of names
# (feature, file that stays, file it names). Kept as the template renders them today; a test fails
# when an entry no longer occurs in any variant, so that the list only shrinks.
NAMED_WHEN_ABSENT = {
    ("benchmarks", "tests/models.py", "benchmarks/bench_models.py"),
    ("opinfo_tests", "csrc/families/WiderDtypes.cpp", "tests/test_dtype_coverage.py"),
    ("opinfo_tests", "tests/sanitizers/harness.py", "tests/test_fallback_sweep.py"),
    ("distributed", f"{PACKAGE}/_cuda_parity.py", f"{PACKAGE}/distributed.py"),
    ("profiler", "csrc/runtime/tracing.h", "csrc/profiler/KinetoSession.cpp"),
    ("profiler", "tests/runtime/tracing_contract.cpp", "csrc/profiler/KinetoSession.cpp"),
    ("kernel_families", "tests/test_opinfo.py", "tests/test_attention.py"),
    ("graphs", f"{PACKAGE}/_cuda_parity.py", f"{PACKAGE}/graphs.py"),
}


def features(answers: dict) -> dict:
    return checks.features(answers)


class Render:
    """A render's files and their text, with what copier/features.yml says of them."""

    def __init__(self, root: Path):
        self.root = root
        self.files = {path.relative_to(root) for path in root.rglob("*") if path.is_file()}
        self.text = {path: (root / path).read_text(errors="replace") for path in self.files}

    def owned(self, feature) -> set[Path]:
        """The files of the render that the feature's paths name (a directory: every file in it)."""
        found = set()
        for pattern in feature.paths:
            for path in self.root.glob(pattern.replace("{{ package_name }}", PACKAGE)):
                found |= {p for p in path.rglob("*") if p.is_file()} if path.is_dir() else {path}
        return {path.relative_to(self.root) for path in found}

    def owned_directories(self, feature) -> set[Path]:
        """The directories the feature's paths name."""
        return {
            path.relative_to(self.root)
            for pattern in feature.paths
            for path in self.root.glob(pattern.replace("{{ package_name }}", PACKAGE))
            if path.is_dir()
        }

    def mentioning(self, pattern: re.Pattern) -> set[str]:
        return {str(path) for path, text in self.text.items() if path.suffix != ".supp" and pattern.search(text)}


def naming(path: Path, is_directory: bool, names_elsewhere: set[str]) -> re.Pattern:
    """What names `path` in another file: its path in the project (a top-level directory with its
    slash: `benchmarks/`), its file name where no file that stays has that name, the name of a test
    or benchmark module, and for a module of the package, its import."""
    if not is_directory:
        forms = [re.escape(str(path)) + r"(?![\w.])"]
    elif len(path.parts) > 1:  # a directory named on its own (its files are named as files)
        forms = [re.escape(str(path)) + r"(?:/(?![\w.])|(?![\w./]))"]
    else:
        forms = [re.escape(str(path)) + r"/(?![\w.])"]
    if not is_directory and path.name not in names_elsewhere:
        forms.append(r"(?<![\w.-])" + re.escape(path.name) + r"(?!\w)")
    if not is_directory and re.match(r"(test|bench)_|.*_contract$", path.stem):  # a test named by -k or in prose
        forms.append(rf"\b{re.escape(path.stem)}\b")
    if not is_directory and path.suffix == ".py" and path.parts[0] == PACKAGE and len(path.parts) == 2:
        forms += [rf"from \.{path.stem} import", rf"from \. import {path.stem}\b", rf"{PACKAGE}\.{path.stem}\b"]
    return re.compile("|".join(forms))


_renders: dict[str, Render] = {}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """rendered(label) -> the Render of a variant under the example's name, made once per process."""

    def get(label: str) -> Render:
        if label not in _renders:
            answers = {key: value for key, value in VARIANTS[label].items() if key != "backend_name"}
            root = tmp_path_factory.mktemp("variant") / "foo"
            _renders[label] = Render(project.render(root, {"backend_name": "foo", **answers}))
        return _renders[label]

    return get


def absent_mentions(everything: Render, render: Render, want: dict) -> set[tuple[str, str, str]]:
    """(feature, file that stays, file it names) for each file of a feature that is off, named in a
    file of the render."""
    names_elsewhere = {path.name for path in render.files}
    found = set()
    for feature in FEATURES:
        if want[feature.name] != feature.off_answer:
            continue
        gone = [(path, False) for path in everything.owned(feature) if path not in render.files]
        gone += [(path, True) for path in everything.owned_directories(feature) if not (render.root / path).exists()]
        for path, is_directory in gone:
            for mentioned_in in render.mentioning(naming(path, is_directory, names_elsewhere)):
                found.add((feature.name, mentioned_in, str(path)))
    return found


@pytest.mark.parametrize("label", VARIANTS)
def test_variant_has_the_paths_and_targets_of_its_features(rendered, label):
    """A feature off: none of its paths, no add_subdirectory of its directory, no file that names one
    of its files (but NAMED_WHEN_ABSENT). A feature on: each of its paths that no feature off removes,
    its directory built, and, with a file the README's table of integration points can name, its row."""
    everything, render = rendered("everything"), rendered(label)
    want = features(VARIANTS[label])
    off = [feature for feature in FEATURES if want[feature.name] == feature.off_answer]
    removed = set().union(*(everything.owned(feature) for feature in off))
    cmake = (render.root / "CMakeLists.txt").read_text()
    readme = render.text[Path("README.md")]
    for feature in FEATURES:
        on = feature not in off
        owned = everything.owned(feature)
        for path in README_NAMES.get(feature.name, ()):
            assert (f"`{path}`" in readme) == on, f"README and {path}: {feature.name} on is {on}"
        in_its_place = {p for pattern in feature.off_paths for p in render.root.glob(pattern)}
        in_its_place_wanted = bool(feature.off_paths) and not on
        assert bool(in_its_place) == in_its_place_wanted, f"{feature.name} on is {on}: {sorted(in_its_place)}"
        if on:
            missing = sorted(str(path) for path in owned - removed - render.files)
            assert not missing, f"{feature.name} is on but the render lacks {missing}"
        else:
            assert not render.owned(feature), (
                f"{feature.name} is off but the render has {sorted(render.owned(feature))}"
            )
        if feature.directory:
            assert (f"add_subdirectory({feature.directory})" in cmake) == on, feature.name
            listed = {
                str(p) for p in render.files if p.name == "CMakeLists.txt" and feature.directory in render.text[p]
            }
            assert on or not listed, f"{feature.name} is off but {sorted(listed)} still build {feature.directory}"
    unexpected = absent_mentions(everything, render, want) - NAMED_WHEN_ABSENT
    assert not unexpected, f"files that name what a feature off removed: {sorted(unexpected)}"


def test_the_files_that_name_an_absent_file_are_still_listed(rendered):
    """NAMED_WHEN_ABSENT only shrinks: each of its entries occurs in a variant."""
    everything = rendered("everything")
    found = set()
    for label in VARIANTS:
        found |= absent_mentions(everything, rendered(label), features(VARIANTS[label]))
    assert not NAMED_WHEN_ABSENT - found, f"no longer true, remove: {sorted(NAMED_WHEN_ABSENT - found)}"


@pytest.mark.parametrize("label", VARIANTS)
def test_variant_has_the_code_and_requirements_of_its_features(rendered, label):
    """The code a feature adds inside files that stay goes with it (SYMBOLS); its test requirements
    are in the `test` extra exactly when a feature that is on needs them; the answers are recorded
    for copier update; the render is formatted and its workflow passes actionlint."""
    render = rendered(label)
    want = features(VARIANTS[label])
    for feature in FEATURES:
        if want[feature.name] == feature.off_answer:
            for symbol in SYMBOLS.get(feature.name, ()):
                named = render.mentioning(re.compile(re.escape(symbol))) - LISTS_ABSENCE.get(feature.name, set())
                assert not named, f"{feature.name} is off but {sorted(named)} name {symbol!r}"
    needed = {name for f in FEATURES if want[f.name] != f.off_answer for name in f.tests_require}
    pyproject = checks.tomllib.loads(render.text[Path("pyproject.toml")])
    test_extra = {re.split(r"[<>=\[ ]", item)[0] for item in pyproject["project"]["optional-dependencies"]["test"]}
    for name in {name for f in FEATURES for name in f.tests_require}:
        assert (name in test_extra) == (name in needed), name
        install = re.search(r"pip install cmake ninja pytest numpy hypothesis.*", render.text[Path("README.md")])
        assert (name in install.group(0).split()) == (name in needed), name
        if name not in needed and name == "expecttest":  # matplotlib is also the benchmark extra's
            assert not render.mentioning(re.compile(name)), f"{name} is needed by no feature that is on"
    workflow = render.root / ".github" / "workflows" / "ci.yml"
    if workflow.exists():
        assert not checks.actionlint_problems(render.root)
    answers = yaml.safe_load(render.text[Path(".copier-answers.yml")])
    assert {k: answers[k] for k in want} == want, "the choices must be recorded for copier update"
    preset = answers["preset"]
    assert checks.features({"preset": preset}) == want or preset == "custom", "a preset that differs is custom"
    assert not format_template.unformatted(render.root)


def other_choice(pattern: str) -> bool:
    """Whether `pattern` lies in the paths of a choice's answer other than the default, which the
    variants (all of the default answer) do not render."""
    for choice in feature_list.load_choices():
        for answer, paths in choice.choice_paths.items():
            if answer != choice.default and any(
                Path(path) in (Path(pattern), *Path(pattern).parents) for path in paths
            ):
                return True
    return False


def test_every_symbol_and_path_of_a_feature_is_in_the_full_render(rendered):
    """SYMBOLS and the paths of copier/features.yml name what the full render has: a pattern that
    matches nothing, or a symbol renamed, would make the checks above pass without checking."""
    everything = rendered("everything")
    for feature in FEATURES:
        for pattern in feature.paths:
            if other_choice(pattern):
                continue  # another driver's file of the feature: tests/test_opencl_driver.py renders it
            matched = list(everything.root.glob(pattern.replace("{{ package_name }}", PACKAGE)))
            assert matched, f"{feature.name}: the path {pattern} of copier/features.yml matches nothing"
        for symbol in SYMBOLS.get(feature.name, ()):
            assert everything.mentioning(re.compile(re.escape(symbol))), f"{feature.name}: {symbol!r} is nowhere"
        if feature.directory:
            assert any(Path(feature.directory) == Path(p) for p in feature.paths), "the directory goes with it"
            assert (everything.root / feature.directory / "CMakeLists.txt").is_file(), feature.directory
    minimal = rendered("minimal")
    for feature in FEATURES:
        for pattern in feature.off_paths:
            assert list(minimal.root.glob(pattern)), (
                f"{feature.name}: the off_path {pattern} matches nothing in minimal"
            )
    assert set(SYMBOLS) | set(README_NAMES) <= {feature.name for feature in FEATURES}


@pytest.mark.parametrize("label", VARIANTS)
def test_what_each_feature_leaves_in_its_place(rendered, label):
    """Where a feature off leaves something in its place, or something stays whatever the choice."""
    render = rendered(label)
    root, want, readme = render.root, features(VARIANTS[label]), render.text[Path("README.md")]
    init = (root / PACKAGE / "__init__.py").read_text()
    workflow = root / ".github" / "workflows" / "ci.yml"
    if workflow.exists():
        assert ("benchmarks/bench_ops.py" in workflow.read_text()) == want["benchmarks"]
    assert ("from .ops import bias_gelu" in init) == want["custom_op"]
    assert ("`FOO_OPINFO`" in readme) == want["opinfo_tests"]
    assert ("from . import distributed" in init) == want["distributed"]
    assert ("`FOO_CCL_CHECK_CALLS`" in readme) == want["distributed"]
    assert ('foo = "torch_foo.compiler:backend"' in render.text[Path("pyproject.toml")]) == want["compile"]
    # The debugging tools that come with the profiler: memory history and snapshots, device monitoring.
    memory = (root / PACKAGE / "memory.py").read_text()
    for name in ("_record_memory_history", "def _snapshot", "def memory_snapshot"):
        assert (name in memory) == want["profiler"], name
    assert ("from .monitoring import" in init) == want["profiler"]
    parity = (root / PACKAGE / "_cuda_parity.py").read_text()
    assert ('"utilization": (PROFILER_OFF' in parity) != want["profiler"], "listed as absent when off"
    # driver.h is one seam, the same whatever the features: a port implements it once.
    driver = (root / "csrc/runtime/driver.h").read_text()
    for call in ("device_metric(", "device_processes(", "stream_begin_capture(", "graph_launch(", "timestamp("):
        assert call in driver, call
    assert (root / "csrc/runtime/emulated/capture.cpp").exists()
    # The allocator's observer, the stack traces its blocks keep, the segment listing and the private
    # pools are general core API (csrc/core/DeviceAllocator.h), and csrc/core/Graph.h's check is in every
    # project (without Graph.cpp nothing captures, so no check is installed and no pool is used).
    assert "inline void check_not_capturing(" in (root / "csrc/core/Graph.h").read_text()
    allocator = (root / "csrc/core/DeviceAllocator.h").read_text()
    for general in ("void begin_allocate_to_pool(", "set_allocator_observer(", "memory_segments("):
        assert general in allocator, general
    # Peer access is not a debugging tool: every project has it, beside the other device queries.
    assert "DeviceCanAccessPeer(int* canAccessPeer" in (root / "csrc/runtime/api_device.cpp").read_text()
    assert "bool can_access_peer(" in (root / "csrc/runtime/emulated/devices.cpp").read_text()
    # What users meet without the families: clear errors (csrc/aten/SparseNotBuilt.cpp, an off_path).
    if not want["kernel_families"]:
        assert "sparse_not_built" in (root / "csrc/aten/SparseNotBuilt.cpp").read_text()
    assert (root / "csrc/aten/Elementwise.cpp").exists() and (root / "csrc/aten/Normalization.cpp").exists()
    # Only the emulated math library's file sees torch's headers (its math_library.cmake, checked above): the
    # operator library's target does not link them.
    assert "torch_headers" not in (root / "csrc/kernels/CMakeLists.txt").read_text()
    # (That no file of the operator library includes torch then, the project's tests/test_layering.py checks.)
    # Convolutions: the library's kernels, else the CPU's through the fallback.
    assert (root / "csrc/aten/ConvolutionOnCpu.cpp").exists() != want["native_operators"]
    if want["native_operators"]:
        assert "fooOpConvolution(" in (root / "csrc/aten/ConvolutionKernels.cpp").read_text()
    assert (root / "tests/test_blas.py").exists() and (root / "tests/test_softmax.py").exists()
    # The operator library's native functions are declared in a header of their own (kernels/native.h).
    assert "fooOpGemm" not in (root / "csrc/kernels/kernels.h").read_text()
    if not want["native_operators"]:
        assert "def test_products_run_on_the_fallback" in (root / "tests/test_blas.py").read_text()
        pointwise_tests = (root / "tests/test_pointwise.py").read_text()
        assert "def test_optimizers_and_activations_run_on_the_fallback" in pointwise_tests
        assert "def test_unscale_and_update_run_on_the_fallback" in (root / "tests/test_amp.py").read_text()
    assert ("from .graphs import" in init) == want["graphs"]
    assert (root / ".pre-commit-config.yaml").exists()


def test_defaults_turn_every_feature_on():
    answers = yaml.safe_load((project.EXAMPLE / ".copier-answers.yml").read_text())
    assert answers["preset"] == "full"
    for feature in FEATURES:
        assert answers[feature.name] == feature.on_answer, f"{feature.name} must default to on: the example shows it"
        for pattern in feature.paths:
            if other_choice(pattern):
                continue  # another driver's file of the feature, which the example (emulated) lacks
            matched = list(project.EXAMPLE.glob(pattern.replace("{{ package_name }}", PACKAGE)))
            assert matched, f"example_generated/ has nothing of {pattern} ({feature.name})"


@pytest.mark.parametrize(
    ("data", "preset", "changed"),
    [
        ({}, "full", {}),
        ({"preset": "minimal"}, "minimal", {}),
        ({"preset": "custom"}, "custom", {}),  # every question asked, each answered with its default: on
        ({"distributed": False}, "custom", {"distributed": False}),
        ({"preset": "full", "compile": False}, "custom", {"compile": False}),
        ({"preset": "minimal", "profiler": True}, "custom", {"profiler": True}),
        ({"preset": "minimal", "ci": "none"}, "custom", {"ci": "none"}),
    ],
    ids=["defaults", "minimal", "custom", "data-alone", "data-over-full", "data-over-minimal", "ci-over-minimal"],
)
def test_preset_sets_defaults_and_data_overrides_them(tmp_path, data, preset, changed):
    """The preset decides every feature's default; an answer given with --data wins over it, with
    any preset, and the answers file then records the preset as custom with every feature, so that
    copier update (which discards the answers of questions it does not ask) keeps them."""
    root = project.render(tmp_path / "p", {"backend_name": "foo", **data})
    answers = yaml.safe_load((root / ".copier-answers.yml").read_text())
    base = checks.features({"preset": data.get("preset", "full")})
    assert {name: answers[name] for name in checks.FEATURES_OFF} == {**base, **changed}
    assert answers["preset"] == preset


def test_a_preset_and_the_answers_it_stands_for_render_the_same(tmp_path):
    by_preset = project.render(tmp_path / "preset", {"backend_name": "foo", "preset": "minimal"})
    by_answers = project.render(tmp_path / "answers", {"backend_name": "foo", **checks.MINIMAL})
    assert checks.test_inputs_digest(by_preset) == checks.test_inputs_digest(by_answers)
    assert checks.build_group("foo", {"preset": "minimal"}) == checks.build_group("foo", checks.MINIMAL)


def test_the_feature_questions_are_the_features_of_the_list():
    """Every yes/no question is a feature, and every question asked only for the preset custom is one
    of copier/features.yml, with its answers: the variants and the checks above cover exactly those.
    The choices between implementations (the driver) are asked too; tests/test_opencl_driver.py
    builds the other driver."""
    questions = yaml.safe_load((ROOT / "copier.yml").read_text().replace("!include", "#"))
    booleans = {name for name, q in questions.items() if isinstance(q, dict) and q.get("type") == "bool"}
    custom = {
        name for name, q in questions.items() if isinstance(q, dict) and "preset == 'custom'" in str(q.get("when"))
    }
    listed = {feature.name for feature in FEATURES}
    choices = {choice.name for choice in feature_list.load_choices() if choice.asked}
    assert booleans <= listed and custom == listed | choices, "a feature is an entry of copier/features.yml"
    assert set(checks.FEATURES_OFF) == listed
    for feature in FEATURES:
        if feature.type == "str":
            assert feature.off_answer in questions[feature.name]["choices"].values(), feature.name


def test_every_feature_is_off_in_a_variant_besides_minimal():
    """Grouping features into one off-variant saves builds, not coverage: each feature is off in a
    variant other than minimal, in exactly one, with only its group's features off beside it; the
    variants built against another torch release keep compile, distributed and the profiler on."""
    groups = checks.off_groups()
    assert sorted(name for group in groups for name in group) == sorted(checks.FEATURES_OFF)
    for name, off in checks.FEATURES_OFF.items():
        labels = [label for label, answers in VARIANTS.items() if label != "minimal" and answers.get(name) == off]
        assert len(labels) == 1, (name, labels)
        group = next(group for group in groups if name in group)
        answers = features(VARIANTS[labels[0]])
        assert {key for key, value in answers.items() if value == checks.FEATURES_OFF[key]} == set(group)
    assert set(checks.OTHER_RELEASE_VARIANTS) <= set(VARIANTS), "name each by its variant's label"
    for label in checks.OTHER_RELEASE_VARIANTS:
        if "torch_version" in VARIANTS[label]:
            assert all(features(VARIANTS[label])[name] for name in ("compile", "distributed", "profiler")), label


def test_shared_builds_are_decided_by_content(tmp_path):
    """The test digest ignores only what builds and tests never read; the build digest also ignores
    the tests and the dependency lists of pyproject.toml (builds install with --no-deps). The
    parallel run's checks.build_group names the same classes of renders (every variant's answers
    among them) as the build digest."""
    groups = {}  # build digest -> the build groups of the renders with that digest

    def digests(label, **answers):
        root = project.render(tmp_path / label, {"backend_name": "foo", **answers})
        build = checks.build_inputs_digest(root)
        name = answers.pop("backend_name", "foo")
        groups.setdefault(build, set()).add(checks.build_group(name, answers))
        return build, checks.test_inputs_digest(root)

    everything = digests("everything")
    off = {feature.name: digests(f"no-{feature.name}", **{feature.name: feature.off_answer}) for feature in FEATURES}
    for feature in FEATURES:  # what the test-only answers and scheduling (checks.TEST_ONLY_ANSWERS) rely on
        assert (off[feature.name][0] != everything[0]) == feature.compiles, f"{feature.name}: `compiles` is wrong"
    assert off["ci"] == everything
    assert off["benchmarks"][1] != everything[1], "the report's test goes"
    assert off["opinfo_tests"][1] != everything[1], "tests change, the build is reused"
    assert digests("three-devices", device_count=3)[0] != everything[0]
    assert digests("npu", backend_name="npu")[0] != everything[0]
    for release in checks.facts.other_torch_releases():
        assert digests(f"torch-{release}", torch_version=release)[0] != everything[0], "built against another torch"
    assert off["distributed"][0] != off["custom_op"][0], "each compiled feature off is a build of its own"
    compiled = [feature for feature in FEATURES if feature.compiles]
    compiled_off = {feature.name: feature.off_answer for feature in compiled}
    no_compiled_extras = digests("no-compiled-extras", **compiled_off)
    minimal = digests("minimal", preset="minimal")
    assert minimal[0] == no_compiled_extras[0] and minimal[1] != no_compiled_extras[1]
    assert digests("all-off", **checks.FEATURES_OFF)[0] == minimal[0]
    for label, answers in VARIANTS.items():
        digests(label.replace(" ", "-") + "-variant", **answers)
    assert all(len(names) == 1 for names in groups.values()), groups
    assert len(set().union(*groups.values())) == len(groups), "renders with different builds share a group"


def test_build_digest_ignores_only_dependency_lists_of_pyproject(tmp_path):
    root = project.render(tmp_path / "foo", {"backend_name": "foo"})
    before = checks.build_inputs_digest(root), checks.test_inputs_digest(root)
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text.replace('test = ["pytest"', 'test = ["pytest", "hypothesis"'))
    assert (checks.build_inputs_digest(root), checks.test_inputs_digest(root)) == before
    pyproject.write_text(text.replace("[tool.setuptools]", "[tool.setuptools]\nzip-safe = false"))
    assert checks.build_inputs_digest(root) != before[0]
    pyproject.write_text(text)
    (root / "tests" / "test_extra.py").write_text("def test_more():\n    pass\n")
    assert checks.build_inputs_digest(root) == before[0] and checks.test_inputs_digest(root) != before[1]


def test_a_reused_build_gives_the_project_its_compiled_extension(tmp_path):
    built, reuser = tmp_path / "built", tmp_path / "reuser"
    extension = Path("torch_foo", "_C.cpython-311-x86_64-linux-gnu.so")
    runtime = Path("build/cpython-311/tests/runtime/contract_test")  # tests/test_runtime.py runs it
    objects = Path("build/cpython-311/csrc/core/CMakeFiles/foo_core.dir/Device.cpp.o")
    for path in (
        extension,
        runtime,
        objects,
        Path("build/lib/torch_foo/_C.so"),
        Path(".venv/lib/site-packages/other.so"),
    ):
        (built / path).parent.mkdir(parents=True, exist_ok=True)
        (built / path).write_bytes(b"compiled " + str(path).encode())
    (reuser / "torch_foo").mkdir(parents=True)
    python = project.reuse_build(built, reuser)
    assert python == built / ".venv" / "bin" / "python"
    assert sorted(p.relative_to(reuser) for p in reuser.rglob("*.so")) == [extension]
    assert sorted(p.relative_to(reuser) for p in (reuser / "build").rglob("*") if p.is_file()) == [runtime]
    for path in (extension, runtime):
        assert (reuser / path).read_bytes() == (built / path).read_bytes()

"""Feature choices: every class of combination (everything, minimal, each option off, alone or in its
group of checks.OFF_TOGETHER) renders
what it promises, passes the generated project's formatters and linters, and builds and passes its
own test suite. Variants whose compiled code and tests are identical share one test run
(checks.test_inputs_digest); variants whose compiled code is identical share one build and run their
own tests against it (checks.build_inputs_digest); a feature that changes C++ gets its own build."""

from pathlib import Path

import pytest
import yaml

import checks
import format_template
import project
from conftest import ROOT

VARIANTS = checks.variants()


def features(answers: dict) -> dict:
    return checks.features(answers)


def files_mentioning(root, text: str) -> list[str]:
    """The files of a render that mention `text`, but for the sanitizers' suppression files: they
    name torch's own functions (torch's flight recorder gathers a CapturedTraceback too), which every
    project meets whatever its features."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.suffix != ".supp" and text in p.read_text()
    )


@pytest.mark.parametrize("label", VARIANTS)
def test_variant_renders_what_it_promises(render, label):
    # Under the example's name whatever name the variant builds under: the checks below name foo's files.
    answers = {key: value for key, value in VARIANTS[label].items() if key != "backend_name"}
    root = render("foo", **answers)
    want = features(answers)
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
    custom_op = [root / "csrc/custom_ops/CustomOps.cpp", root / "torch_foo/ops.py", root / "tests/test_custom_ops.py"]
    assert [path.exists() for path in custom_op] == [want["custom_op"]] * 3
    if want["custom_op"]:
        assert "`csrc/custom_ops/CustomOps.cpp`" in readme and "`torch_foo/ops.py`" in readme
        assert "from .ops import bias_gelu" in (root / "torch_foo" / "__init__.py").read_text()
    else:
        for gone in ("bias_gelu", "CustomOps", "test_custom_ops", "/ops.py", "from .ops", '"ops"'):
            assert not files_mentioning(root, gone), gone
    assert (root / "tests" / "test_opinfo.py").exists() == want["opinfo_tests"]
    if want["opinfo_tests"]:
        assert "`FOO_OPINFO`" in readme and "`tests/test_opinfo.py`" in readme
        assert "expecttest" in (root / "pyproject.toml").read_text() and "expecttest" in readme
    else:
        # Nothing else uses PyTorch's internal test machinery, so its requirements go with it.
        for gone in ("OPINFO", "test_opinfo", "torch.testing._internal", "expecttest"):
            assert not files_mentioning(root, gone), gone
    distributed = [root / "csrc/distributed", root / "torch_foo/distributed.py", root / "examples/ddp.py"]
    assert [path.exists() for path in distributed] == [want["distributed"]] * 3
    assert (root / "tests" / "test_distributed.py").exists() == want["distributed"]
    if want["distributed"]:
        assert "`csrc/distributed/Backend.cpp`" in readme and "`FOO_CCL_CHECK_CALLS`" in readme
        assert "from . import distributed" in (root / "torch_foo" / "__init__.py").read_text()
    else:
        for gone in ("fooccl", "csrc/distributed", "distributed/Bindings.h", "run_ranks", "CCL_CHECK"):
            assert not files_mentioning(root, gone), gone
    compile_ = [root / "csrc/compile", root / "torch_foo/compiler.py", root / "torch_foo/_inductor"]
    assert [path.exists() for path in compile_] == [want["compile"]] * 3
    assert (root / "tests" / "test_compile.py").exists() == want["compile"]
    if want["compile"]:
        assert "`csrc/compile/CompiledKernels.cpp`" in readme
        assert 'foo = "torch_foo.compiler:backend"' in (root / "pyproject.toml").read_text()
    else:
        compile_words = ("CompiledKernels", "compiler.py", "_dynamo.py", "_inductor", "torch_dynamo_backends")
        for gone in (*compile_words, "compiled_kernel"):
            assert not files_mentioning(root, gone), gone
    assert (root / "csrc" / "profiler").exists() == want["profiler"]
    assert (root / "tests" / "test_profiler.py").exists() == want["profiler"]
    assert ("`csrc/profiler/KinetoSession.cpp`" in readme) == want["profiler"]
    if not want["profiler"]:
        for gone in ("bench_profiler", "kineto", "REGISTER_PRIVATEUSE1_PROFILER", "test_profiler"):
            assert not files_mentioning(root, gone), gone
    # The debugging tools that come with the profiler: memory history and snapshots, device monitoring.
    debugging = [
        root / "csrc/core/MemoryHistory.cpp",
        root / "csrc/core/MemoryHistory.h",
        root / "csrc/runtime/api_monitoring.cpp",
        root / "csrc/runtime/emulated/monitoring.cpp",
        root / "torch_foo/monitoring.py",
        root / "tests/test_memory_debugging.py",
    ]
    assert [path.exists() for path in debugging] == [want["profiler"]] * len(debugging)
    package = {name: (root / "torch_foo" / f"{name}.py").read_text() for name in ("__init__", "memory", "_cuda_parity")}
    for name in ("_record_memory_history", "def _snapshot", "def memory_snapshot"):
        assert (name in package["memory"]) == want["profiler"], name
    assert ("from .monitoring import" in package["__init__"]) == want["profiler"]
    assert ('"utilization": (PROFILER_OFF' in package["_cuda_parity"]) != want["profiler"], "listed as absent when off"
    if not want["profiler"]:
        # The allocator's observer, the stack traces its blocks keep and the segment listing are
        # general core API (csrc/core/DeviceAllocator.h); the memory history that uses them is not.
        hooks = ("MemoryHistory", "memory_history::", "CapturedTraceback")
        monitoring = ("DeviceGetMetric", "DeviceMetric", "DeviceGetProcesses", "activity_begin", "monitoring.py")
        for gone in (*hooks, *monitoring, "test_memory_debugging"):
            assert not files_mentioning(root, gone), gone
    # Peer access is not a debugging tool: every project has it, beside the other device queries.
    assert "DeviceCanAccessPeer(int* canAccessPeer" in (root / "csrc/runtime/api_device.cpp").read_text()
    assert "bool can_access_peer(" in (root / "csrc/runtime/emulated/devices.cpp").read_text()
    families = [
        root / "csrc/families",
        root / "csrc/kernels/attention.h",
        root / "csrc/kernels/emulated/recurrent.cpp",
        root / "tests/test_attention.py",
        root / "tests/test_sparse.py",
    ]
    assert [path.exists() for path in families] == [want["kernel_families"]] * len(families)
    if want["kernel_families"]:
        assert "`csrc/families/Attention.cpp`" in readme and "`csrc/families/Sparse.cpp`" in readme
        assert "sparse_not_built" not in (root / "csrc/aten/Fallback.cpp").read_text()
    else:
        family_words = ("Attention.cpp", "WiderDtype", "run_widened", "OpAttention", "OpHistogram")
        sparse_words = ("Sparse.h", "Sparse.cpp", "route_sparse_ops_to_fallback", "test_sparse.py")
        recurrent_words = ("RecurrentCells", "OpLstmCell", "OpGruCell", "recurrent.cpp")
        for gone in (*family_words, *sparse_words, *recurrent_words, "csrc/families"):
            assert not files_mentioning(root, gone), gone
        # What users meet instead: clear errors, from the fallback (csrc/aten/Fallback.cpp).
        assert "sparse_not_built" in (root / "csrc/aten/Fallback.cpp").read_text()
    aten = ("Blas.cpp", "Softmax.cpp", "Reductions.cpp", "Pointwise.cpp", "AmpKernels.cpp")
    emulated = ("sums.cpp", "pointwise.cpp", "amp.cpp", "host_math.cpp")
    native = [root / "csrc/aten" / name for name in aten] + [root / "csrc/kernels/emulated" / name for name in emulated]
    assert [path.exists() for path in native] == [want["native_operators"]] * len(native)
    assert (root / "csrc/aten/Elementwise.cpp").exists() and (root / "csrc/aten/Normalization.cpp").exists()
    # Without the emulated math library the operator library has no torch on its include path.
    kernels_cmake = (root / "csrc/kernels/CMakeLists.txt").read_text()
    assert ("torch_headers" in kernels_cmake) == want["native_operators"]
    # (That no file of the operator library includes torch then, the project's tests/test_layering.py checks.)
    convolution = (root / "csrc/aten/Convolution.cpp").read_text()
    assert ("fooOpConvolution(" in convolution) == want["native_operators"], "else the CPU's, through the fallback"
    assert (root / "tests/test_blas.py").exists() and (root / "tests/test_softmax.py").exists()
    if want["native_operators"]:
        assert "`csrc/aten/Blas.cpp`" in readme and "`csrc/aten/Softmax.cpp`" in readme
        assert "fooOpGemm" in (root / "csrc/kernels/kernels.h").read_text()
    else:
        kernels = ("OpGemm", "OpConvolution", "OpSoftmax", "OpSum(", "OpSum,", "OpSum)", "sums.cpp")
        kernels += ("OpPointwise", "OpUnscale", "OpUpdateScale", "host_math", "host_sqrt")
        for gone in ("Blas.cpp", "Softmax.cpp", "Reductions.cpp", "Pointwise.cpp", "AmpKernels.cpp", *kernels):
            assert not files_mentioning(root, gone), gone
        assert "def test_products_run_on_the_fallback" in (root / "tests/test_blas.py").read_text()
        pointwise_tests = (root / "tests/test_pointwise.py").read_text()
        assert "def test_optimizers_and_activations_run_on_the_fallback" in pointwise_tests
        assert "def test_unscale_and_update_run_on_the_fallback" in (root / "tests/test_amp.py").read_text()
    meta = ("csrc/core/BackendMeta.h", "csrc/core/BackendMeta.cpp", "csrc/aten/BackendMetaCopies.cpp")
    meta += ("csrc/compat/Serialization.h", "tests/test_backend_meta.py")
    assert [(root / path).exists() for path in meta] == [want["backend_meta"]] * len(meta)
    if not want["backend_meta"]:
        for gone in ("BackendMeta", "Serialization.h", "backend metadata"):
            assert not files_mentioning(root, gone), gone
    assert (root / ".pre-commit-config.yaml").exists()
    graphs = [
        root / "torch_foo/graphs.py",
        root / "csrc/core/Graph.cpp",
        root / "csrc/runtime/api_graphs.cpp",
        root / "csrc/runtime/emulated/graphs.cpp",
        root / "tests/test_graphs.py",
        root / "tests/runtime/graphs_contract.cpp",
    ]
    assert [path.exists() for path in graphs] == [want["graphs"]] * len(graphs)
    assert (root / "benchmarks/bench_graphs.py").exists() == (want["graphs"] and want["benchmarks"])
    assert ("`csrc/core/Graph.cpp`" in readme) == want["graphs"]
    # Every project has what the rest asks about graphs and the allocator's private pools (general
    # core: without Graph.cpp nothing captures, so no check is installed and no pool is used).
    assert "inline void check_not_capturing(" in (root / "csrc/core/Graph.h").read_text()
    assert "void begin_allocate_to_pool(" in (root / "csrc/core/DeviceAllocator.h").read_text()
    if want["graphs"]:
        assert "from .graphs import" in (root / "torch_foo" / "__init__.py").read_text()
    else:
        # The CUDA parity table and its test name the graph API to say that it is absent.
        parity = {"torch_foo/_cuda_parity.py", "tests/test_cuda_parity.py"}
        graph_words = (
            "GraphImplInterface",
            "graphs_contract",
            "bench_graphs",
            "FooGraph",
            "from .graphs",
            "graph_pool_handle",
        )
        capture_words = ("StreamBeginCapture", "GraphLaunch", "capture_check", "ErrorStreamCapture", "Kind::Graph")
        pool_words = ("not_capturing_check = &", "captures_into", "is_current_stream_capturing")
        for gone in (*graph_words, *capture_words, *pool_words):
            assert not set(files_mentioning(root, gone)) - parity, gone
    answers = yaml.safe_load((root / ".copier-answers.yml").read_text())
    assert {k: answers[k] for k in want} == want, "the choices must be recorded for copier update"
    preset = answers["preset"]
    assert checks.features({"preset": preset}) == want or preset == "custom", "a preset that differs is custom"
    assert not format_template.unformatted(root)


def test_defaults_turn_every_feature_on():
    answers = yaml.safe_load((project.EXAMPLE / ".copier-answers.yml").read_text())
    assert answers["preset"] == "full"
    for name, off in checks.FEATURES_OFF.items():
        assert answers[name] != off, f"{name} must default to on: the example shows every feature"
    example = project.EXAMPLE
    assert (example / "benchmarks").is_dir() and (example / ".github" / "workflows" / "ci.yml").is_file()
    assert (example / "csrc" / "custom_ops" / "CustomOps.cpp").is_file()
    assert (example / "torch_foo" / "ops.py").is_file()
    assert (example / "tests" / "test_opinfo.py").is_file()
    assert (example / "csrc" / "compile").is_dir() and (example / "csrc" / "profiler").is_dir()
    assert (example / "csrc" / "families").is_dir()


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


def test_every_yes_no_question_is_a_covered_feature():
    questions = yaml.safe_load((ROOT / "copier.yml").read_text().replace("!include", "#"))
    booleans = {name for name, q in questions.items() if isinstance(q, dict) and q.get("type") == "bool"}
    missing = booleans - set(checks.FEATURES_OFF)
    assert not missing, f"add {sorted(missing)} to FEATURES_OFF in scripts/checks.py so that the variants cover them"


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
    assert digests("no-ci", ci="none") == everything
    no_benchmarks = digests("no-benchmarks", benchmarks=False)
    assert no_benchmarks[0] == everything[0] and no_benchmarks[1] != everything[1], "the report's test goes"
    assert digests("three-devices", device_count=3)[0] != everything[0]
    assert digests("npu", backend_name="npu")[0] != everything[0]
    no_opinfo = digests("no-opinfo", opinfo_tests=False)
    assert no_opinfo[0] == everything[0] and no_opinfo[1] != everything[1], "tests change, the build is reused"
    for release in checks.facts.other_torch_releases():
        assert digests(f"torch-{release}", torch_version=release)[0] != everything[0], "built against another torch"
    no_custom_op = digests("no-custom-op", custom_op=False)
    assert no_custom_op[0] != everything[0], "a C++ file less is another build"
    assert digests("no-distributed", distributed=False)[0] not in (everything[0], no_custom_op[0])
    compiled = ("custom_op", "distributed", "compile", "profiler", "kernel_families", "graphs", "native_operators")
    compiled += ("backend_meta",)
    for name in compiled[2:]:
        assert digests(f"no-{name}", **{name: False})[0] != everything[0], f"{name} changes the C++"
    compiled_off = dict.fromkeys(compiled, False)
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

"""The private torch API the package uses (torch_foo/_compat.py): the self-test passes with the
installed torch, fails naming the touchpoint and the torch version when one is missing or changed
shape, and the replacements that remain are scoped to the device."""

import ast
import inspect
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from numerics import assert_matches_cpu

import torch_foo
from torch_foo import _compat

DEVICE = "foo"


@pytest.mark.parametrize("feature", _compat.FEATURES)
def test_every_touchpoint_exists_with_the_shape_the_package_uses(feature):
    assert _compat.problems(feature) == {}


def test_every_touchpoint_says_what_it_is_and_what_public_api_is_missing():
    assert len({t.name for t in _compat.TOUCHPOINTS}) == len(_compat.TOUCHPOINTS)
    for touchpoint in _compat.TOUCHPOINTS:
        assert touchpoint.what and touchpoint.public_alternative, touchpoint.name
        assert touchpoint.kind in ("callable", "class", "value", "module"), touchpoint.name
        if touchpoint.applies():
            assert _compat.resolve(touchpoint.name) is not None
        else:
            with pytest.raises(_compat.TorchCompatError, match="not a touchpoint of this torch release"):
                _compat.resolve(touchpoint.name)
    assert any(touchpoint.applies() for touchpoint in _compat.TOUCHPOINTS if touchpoint.name.startswith("numerics."))


def test_a_touchpoint_belongs_to_the_releases_that_have_it():
    """Where torch releases differ, each form is a touchpoint with the releases that have it, and only
    those of the running release are checked."""
    running = _compat._version.running()[:2]
    assert _compat.dataclasses.replace(_compat.TOUCHPOINTS[0], since=running).applies()
    assert not _compat.dataclasses.replace(_compat.TOUCHPOINTS[0], until=running).applies()
    later = (running[0], running[1] + 1)
    assert not _compat.dataclasses.replace(_compat.TOUCHPOINTS[0], since=later).applies()
    assert set(_compat.applicable()) == {t for t in _compat.TOUCHPOINTS if t.applies()}


# Underscored, but documented as public API: https://pytorch.org/docs/stable/generated/torch._check.html
DOCUMENTED = {"torch._check"}


def test_the_package_touches_private_torch_api_only_through_compat():
    """Outside _compat.py, no module of the package imports or reads a private torch module or name."""
    root = Path(torch_foo.__file__).parent
    private = re.compile(r"\btorch(?:\.\w+)*\._[a-z]\w*|from torch\S* import [^\n]*\b_[a-z]")
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "_compat.py":
            continue
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
        code = re.sub(r'"""(.*?)"""', "", code, flags=re.S)  # docstrings name the touchpoints
        offenders += [f"{path.relative_to(root)}: {m}" for m in private.findall(code) if m not in DOCUMENTED]
        if "sys.meta_path" in code:  # the process-wide import hook is _compat.after_import's alone
            offenders.append(f"{path.relative_to(root)}: sys.meta_path")
    assert offenders == []


def torch_objects_changed(tree: ast.Module) -> list[tuple[int, str]]:
    """Where a module replaces or deletes an attribute of torch (assignment, del, setattr, delattr) or a
    module in sys.modules: an attribute of a name bound to torch (an import of torch or from torch, a
    value read from one, a touchpoint from _compat.resolve or owner, a module from sys.modules). Each
    (line, code). Storing items into torch's tables (the compile workers' current device, as torch's
    own device interfaces do) uses them and is not counted."""
    torch_names: set[str] = set()

    def from_torch(node: ast.AST) -> bool:
        while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
            if isinstance(node, ast.Call):
                function = node.func
                called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
                if called in {"resolve", "owner", "import_module"}:
                    return True
                if isinstance(function, ast.Name) and function.id in {"getattr", "vars"} and node.args:
                    node = node.args[0]
                    continue
                node = function
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.modules":
                return True
            else:
                node = node.value
        return isinstance(node, ast.Name) and node.id in torch_names

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            torch_names.update(
                (a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "torch"
            )
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            torch_names.update(a.asname or a.name for a in node.names)
    for _ in range(3):  # names bound from torch names, through up to three assignments
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and from_torch(node.value):
                torch_names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    changes = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"setattr", "delattr"}:
            if node.args and (from_torch(node.args[0]) or ast.unparse(node.args[0]).startswith("sys.modules")):
                changes.append((node.lineno, ast.unparse(node)))
        changes += [
            (node.lineno, ast.unparse(target))
            for target in targets
            if (isinstance(target, ast.Attribute) and from_torch(target.value))
            or (isinstance(target, ast.Subscript) and ast.unparse(target.value) == "sys.modules")
        ]
    return changes


def test_only_compat_changes_torch():
    """The replacements of torch's objects that remain are _compat.py's, each scoped to the device: no
    other module of the package assigns into torch."""
    root = Path(torch_foo.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name != "_compat.py":
            tree = ast.parse(path.read_text())
            offenders += [f"{path.relative_to(root)}:{line}: {text}" for line, text in torch_objects_changed(tree)]
    assert offenders == []
    # The check sees each way in which _compat.py itself changes torch.
    changes = [text for _, text in torch_objects_changed(ast.parse(Path(_compat.__file__).read_text()))]
    assert any(text.startswith("setattr(sys.modules[") for text in changes), changes
    assert "options._resolve_auto_acc_dtype" in changes, changes
    assert "setattr(torch.nn.Module, name, _ModuleMethod(method, name))" in changes, changes
    assert "node_class.is_cpu" in changes, changes


@pytest.mark.parametrize(
    "code",
    [
        "import torch\ntorch.nn.functional.relu = None",
        "import torch.nn.functional as F\nF.relu = None",
        "from torch.nn import functional\nsetattr(functional, 'relu', None)",
        "import sys\nsetattr(sys.modules['torch.nn'], 'x', 1)",
        "from . import _compat\ncls = _compat.owner('x')\ncls.method = None",
        "import torch\nmodule = torch.nn\ndel module.Linear",
        "import sys\nsys.modules['torch.nn'] = None",
    ],
)
def test_the_torch_change_check_finds(code):
    assert torch_objects_changed(ast.parse(code)), code


def test_the_torch_change_check_leaves_the_package_alone():
    code = "import torch\nclass Stream(torch.Stream):\n    pass\nStream.x = 1\nvalue = {}\nvalue['a'] = torch.ones(1)"
    assert torch_objects_changed(ast.parse(code)) == []


def test_a_missing_touchpoint_is_named_with_the_torch_version(monkeypatch):
    from torch._inductor.codegen import common

    monkeypatch.delattr(common, "register_device_op_overrides")
    monkeypatch.setattr(_compat, "_checked", set())
    with pytest.raises(_compat.TorchCompatError) as error:
        _compat.check("inductor")
    message = str(error.value)
    assert error.value.touchpoints == ("inductor.register_device_op_overrides",)
    assert "torch._inductor.codegen.common.register_device_op_overrides" in message
    assert f"torch {torch.__version__}" in message and _compat.CHECKED_WITH in message
    assert "Public alternative:" in message


def test_a_changed_signature_is_named(monkeypatch):
    from torch._inductor.codegen import common

    def register_backend_for_device(device, device_scheduling, device_wrapper_codegen):  # no C++/FX wrappers
        raise AssertionError("not called by the check")

    monkeypatch.setattr(common, "register_backend_for_device", register_backend_for_device)
    problems = _compat.problems("inductor")
    assert list(problems) == ["inductor.register_backend_for_device"]
    assert "device_cpp_wrapper_codegen" in problems["inductor.register_backend_for_device"]


def test_a_changed_format_is_named(monkeypatch):
    touchpoint = _compat.touchpoint("inductor.cpp_kernel_definition")
    monkeypatch.setattr(
        _compat,
        "_BY_NAME",
        {**_compat._BY_NAME, touchpoint.name: _compat.dataclasses.replace(touchpoint, source_contains="no such text")},
    )
    monkeypatch.setattr(_compat, "TOUCHPOINTS", tuple(_compat._BY_NAME.values()))
    assert "no such text" in _compat.problems("inductor")["inductor.cpp_kernel_definition"]


def test_import_fails_clearly_without_a_core_touchpoint(run_python):
    result = run_python(
        """
        import torch
        del torch._register_device_module
        import torch_foo
        """
    )
    assert result.returncode != 0
    assert "TorchCompatError" in result.stderr
    assert "core.register_device_module (torch._register_device_module): missing" in result.stderr
    assert f"torch {torch.__version__}" in result.stderr


def test_compile_registration_names_a_missing_touchpoint(run_python):
    """The compiler's touchpoints are checked when it registers (as it loads, or when Inductor first
    needs the backend), not at import; a missing one is named in the warning, and torch.compile keeps
    working for other devices."""
    result = run_python(
        """
        import warnings
        import torch
        import torch._inductor.scheduler as scheduler
        del scheduler.BaseSchedulerNode.is_cpu
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch_foo  # registers now if the scheduler loaded the compiler, else below
            import torch._inductor.compile_fx
            from torch._inductor.codegen.common import init_backend_registration
            init_backend_registration()  # what Inductor calls before compiling (torch 2.15: the hook)
        print("\\n".join(str(w.message) for w in caught))
        """
    )
    assert result.returncode == 0, result.stderr
    assert "could not register with torch._inductor.compile_fx" in result.stdout
    name = "inductor.BaseSchedulerNode.is_cpu"
    assert f"{name} (torch._inductor.scheduler.{name.partition('.')[2]}): missing" in result.stdout


def test_import_does_not_load_the_compiler(run_python):
    result = run_python(
        """
        import sys, torch, torch_foo
        print(sorted(m for m in sys.modules if m.startswith(("torch._dynamo", "torch._inductor"))))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_import_hook_waits_for_the_compiler_modules_only(run_python):
    """_compat.after_import's finder waits for torch._dynamo, and under torch 2.14 for
    torch._inductor.compile_fx (from 2.15 on, Inductor calls the device module's _inductor_backend_init
    instead), finds no module itself, and has nothing left waiting once the compiler has loaded."""
    result = run_python(
        """
        import json, sys, torch, torch_foo
        from torch_foo import _compat
        finders = [f for f in sys.meta_path if isinstance(f, _compat._AfterImport)]
        before = sorted(_compat._after_import)
        found = [finders[0].find_spec(name, None) for name in ("json", "torch.fx")]
        import torch._inductor.compile_fx
        from torch._dynamo.device_interface import get_interface_for_device
        interface = get_interface_for_device("foo").__module__
        after = sorted(_compat._after_import)
        report = dict(finders=len(finders), before=before, found=repr(found), after=after, interface=interface)
        print(json.dumps(report))
        """
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["finders"] == 1
    waited = ["torch._dynamo"] if _compat._version.at_least(2, 15) else ["torch._dynamo", "torch._inductor.compile_fx"]
    assert report["before"] == waited
    assert report["found"] == "[None, None]"
    assert report["after"] == []
    assert report["interface"].startswith("torch_foo")


def test_inductor_registers_the_backend_when_it_first_needs_it(run_python):
    """Under torch 2.15 Inductor registers the backend through torch.foo._inductor_backend_init
    when it first needs it (init_backend_registration, which every compilation calls first), not when
    its modules load; under 2.14 the import hook has registered it as compile_fx loaded."""
    result = run_python(
        """
        import json, torch, torch_foo
        import torch._inductor.compile_fx
        from torch._inductor.codegen.common import get_scheduling_for_device, init_backend_registration
        loaded = get_scheduling_for_device("foo")
        init_backend_registration()
        needed = get_scheduling_for_device("foo")
        print(json.dumps([repr(loaded), needed.__module__, torch.foo._inductor_backend_init.__module__]))
        """
    )
    assert result.returncode == 0, result.stderr
    loaded, needed, hook = json.loads(result.stdout.strip().splitlines()[-1])
    assert (loaded == "None") == _compat._version.at_least(2, 15), loaded
    assert needed == "torch_foo._inductor.scheduling"
    assert hook == "torch_foo.compiler"


def test_the_scheduler_replacement_answers_only_for_the_device():
    from torch._inductor.codegen.common import init_backend_registration
    from torch._inductor.scheduler import BaseSchedulerNode

    init_backend_registration()  # what Inductor calls first: the backend is registered by then

    replacement = BaseSchedulerNode.is_cpu
    original = inspect.unwrap(replacement)
    assert original is not replacement, "the device's nodes are not scheduled as C++ kernels"

    def node(device):
        return SimpleNamespace(get_device=lambda: device)

    for device in (None, torch.device("cpu"), torch.device("meta"), torch.device("cuda", 0)):
        assert replacement(node(device)) == original(node(device)), device
    assert replacement(node(torch.device(DEVICE, 0))) is True
    assert original(node(torch.device(DEVICE, 0))) is False
    _compat.schedule_device_nodes_as_cpp(DEVICE)  # again: changes nothing
    assert BaseSchedulerNode.is_cpu is replacement


def test_only_the_device_classes_are_added_to_dynamos_in_graph_classes():
    """Dynamo builds the device's Stream and Event in the graph: torch 2.15 takes them from the
    registered device interface, under 2.14 _compat.trace_in_graph adds them; nothing else of the package."""
    import torch._dynamo  # noqa: F401  registers the device interface
    from torch._dynamo.variables.user_defined import UserDefinedClassVariable

    in_graph = UserDefinedClassVariable._in_graph_classes()
    added = {cls for cls in in_graph if cls.__module__.startswith("torch_foo")}
    assert added == {torch.foo.Stream, torch.foo.Event}


def test_the_kernel_parameter_slot_comes_from_the_extension():
    from torch_foo import _C
    from torch_foo._inductor.scheduling import KERNEL_ABI

    declaration = _C._compiled_kernel_abi()
    assert re.search(r"union fooKernelParam \{.*\};", declaration)
    assert KERNEL_ABI.endswith(declaration)


def test_distributed_registration_names_a_missing_touchpoint(run_python):
    result = run_python(
        """
        import warnings
        import torch, torch.distributed as dist
        setter = vars(dist.ProcessGroup)["_set_default_backend"]  # the descriptor, which binds self
        del dist.ProcessGroup._set_default_backend
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch_foo
        print("\\n".join(str(w.message) for w in caught))
        dist.ProcessGroup._set_default_backend = setter  # torch's own init_process_group needs it
        store = dist.HashStore()
        try:
            dist.init_process_group("fooccl", store=store, rank=0, world_size=1)
        except Exception as error:
            print(type(error).__name__, error)
        """
    )
    assert result.returncode == 0, result.stderr
    touchpoint = "ProcessGroup._set_default_backend"
    name = f"distributed.{touchpoint} (torch.distributed.{touchpoint}): missing"
    assert name in result.stdout
    assert "torch.distributed cannot use fooccl" in result.stdout
    assert result.stdout.count(name) >= 2, result.stdout  # the warning, then the error of init_process_group


def test_linear_cross_entropy_accumulates_as_on_the_cpu():
    """_numerics.py gives the device the CPU's 'auto' choices of F.linear_cross_entropy's chunked path
    (its policy function): in bfloat16, loss and gradients equal the CPU's as the driver's numerics
    profile promises (bit for bit on the emulated device; within bfloat16's tolerance where the
    products are the device's own, as on OpenCL). With torch's generic choice they differ (2.14.1: the
    loss by 0.125)."""
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

    torch.manual_seed(0)
    x, w = torch.randn(256, 32, dtype=torch.bfloat16), torch.randn(1024, 32, dtype=torch.bfloat16)
    target = torch.randint(0, 1024, (256,))
    options = LinearCrossEntropyOptions(batch_chunk_size=32, chunking_method=None)

    def run(device):
        inputs = x.clone().to(device).requires_grad_()
        weight = w.clone().to(device).requires_grad_()
        loss = torch.nn.functional.linear_cross_entropy(inputs, weight, target.to(device), options=options)
        loss.backward()
        return [t.cpu() for t in (loss, inputs.grad, weight.grad)]

    for on_device, on_cpu in zip(run(DEVICE), run("cpu"), strict=True):
        assert_matches_cpu(on_device, on_cpu)


def test_the_linear_cross_entropy_replacement_answers_only_for_the_device():
    policy = _compat.resolve("numerics.linear_cross_entropy_policy")
    resolve_dtype = _compat.resolve("numerics.linear_cross_entropy_resolve")
    original_policy, original_resolve = inspect.unwrap(policy), inspect.unwrap(resolve_dtype)
    assert original_policy is not policy and original_resolve is not resolve_dtype, "no replacement"
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for device_type in (None, "cpu", "cuda", "meta"):
            assert policy(device_type, dtype) == original_policy(device_type, dtype)
            device = None if device_type is None else torch.device(device_type)
            assert resolve_dtype(dtype, device) == original_resolve(dtype, device)
        assert policy(DEVICE, dtype) == original_policy("cpu", dtype)
        assert resolve_dtype(dtype, torch.device(DEVICE, 0)) == original_resolve(dtype, torch.device("cpu"))
    _compat.linear_cross_entropy_as_cpu(DEVICE)  # again: changes nothing
    assert _compat.resolve("numerics.linear_cross_entropy_policy") is policy

"""Every private PyTorch API torch_foo uses, in one place, and the self-test that checks them.

PyTorch has no public API yet for much of what an out-of-tree device needs (registering a device
module, an Inductor backend, a Dynamo device interface, a process group with a custom default
backend). torch_foo uses the private API that torch's own backends use, and only through this
module: each touchpoint below is a named entry that says what it is, where torch has it, and which
public alternative is missing. The other modules get the object with ``resolve(name)``.

``check(feature)`` is the self-test. It runs when the feature registers, before anything that depends
on a touchpoint: "core" at ``import torch_foo``, "dynamo" and "inductor" when torch loads its
compiler (compiler.py: the compiler is a heavy import, which ``import torch_foo`` never makes),
"distributed" when the c10d backend registers.
It checks that each touchpoint still exists with the
shape we use (present, callable or a class, the parameters we pass) and raises ``TorchCompatError``
naming every touchpoint that changed and the torch version, instead of an AttributeError deep inside
a compile or a collective. A new torch release: run tests/test_compat.py, fix what it names, and update
``CHECKED_WITH``.

Where torch has no registration API, the replacements that remain are here, and scoped to this
device: they change nothing for any other device. No other module of the package assigns into torch
(tests/test_compat.py checks it). ``linear_cross_entropy_as_cpu`` gives the device the CPU's
numerics choices (_numerics.py calls it); ``schedule_device_nodes_as_cpp`` and, under torch 2.14,
``trace_in_graph`` serve the compiler. The one process-wide change is ``after_import``'s finder on
``sys.meta_path``, which waits for the compiler's modules (from torch 2.15 on, torch._dynamo only)
and finds nothing itself.
The C++ touchpoints are in csrc/compat/TorchCompat.h. docs/integration/compat.md in the template
repository lists both sides.
"""

import dataclasses
import importlib
import importlib.abc
import importlib.machinery
import inspect
import re
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from . import _version

# The torch releases every touchpoint below was checked against: the releases the template supports
# (its copier/torch.yml), each built and tested by the template's `make test` and CI matrix.
CHECKED_WITH = "2.15.0, 2.14.1"
NO_PUBLIC_API = f"none in torch {CHECKED_WITH}"


@dataclasses.dataclass(frozen=True)
class Touchpoint:
    """One private torch API: ``module``.``attribute`` (attribute may be a dotted path into a class)."""

    name: str  # how the package and its errors name it
    feature: str  # the self-test group that checks it (see check())
    module: str
    attribute: str  # "" for the module itself
    what: str  # what the package uses it for
    public_alternative: str = NO_PUBLIC_API  # and the upstream issue or PR, where one exists
    kind: str = "callable"  # "callable", "class", "value" or "module"
    parameters: tuple[str, ...] = ()  # parameter names the package passes (checked where inspectable)
    required: bool = True  # False: the feature works without it (its registration warns and goes on)
    source_contains: str = ""  # text the function's source must contain (a format the package parses)
    # The torch releases (major, minor) that have it, `until` excluded: where releases differ, each
    # form is a touchpoint of its own, and the package branches on _version.at_least().
    since: tuple[int, int] = (2, 0)
    until: tuple[int, int] | None = None

    @property
    def where(self) -> str:
        return f"{self.module}.{self.attribute}" if self.attribute else self.module

    def applies(self) -> bool:
        """Whether the running torch release is one this touchpoint belongs to."""
        release = _version.running()[:2]
        return self.since <= release and (self.until is None or release < self.until)


TOUCHPOINTS: tuple[Touchpoint, ...] = (
    # --- core: checked at `import torch_foo` (torch._C is loaded already: costs two getattr calls)
    Touchpoint(
        "core.privateuse1_backend_name",
        "core",
        "torch._C",
        "_get_privateuse1_backend_name",
        "reads the name PrivateUse1 was renamed to, so that a second backend in the process fails clearly "
        "and importing again renames nothing",
        f"{NO_PUBLIC_API} (torch.utils.rename_privateuse1_backend only sets it)",
    ),
    Touchpoint(
        "core.register_device_module",
        "core",
        "torch",
        "_register_device_module",
        "registers this package as torch.foo; the PrivateUse1 tutorial calls it",
        f"{NO_PUBLIC_API} (the PrivateUse1 documentation names the private function)",
        parameters=("device_type", "module"),
    ),
    # --- numerics: optional; a torch without them keeps its generic choice for the device (a warning)
    Touchpoint(
        "numerics.linear_cross_entropy_policy",
        "numerics",
        "torch.nn.modules.linear_cross_entropy_options",
        "_auto_acc_policy",
        "F.linear_cross_entropy's 'auto' accumulation policy: replaced by a function that answers as for "
        "the CPU for this device and calls the original for every other device (linear_cross_entropy_as_cpu)",
        f"{NO_PUBLIC_API}: the policy is chosen by device type, with no registration for a new one",
        parameters=("device_type", "dtype"),
        required=False,
    ),
    Touchpoint(
        "numerics.linear_cross_entropy_resolve",
        "numerics",
        "torch.nn.modules.linear_cross_entropy_options",
        "LinearCrossEntropyOptions._resolve_auto_acc_dtype",
        "the same choice for the 'auto' accumulation dtype; replaced by a function that answers as for "
        "the CPU for this device and calls the original for every other device (linear_cross_entropy_as_cpu)",
        parameters=("dtype", "device"),
        required=False,
    ),
    # --- graphs: make_graphed_callables flattens arguments and outputs as torch.cuda's does
    Touchpoint(
        "graphs.tree_flatten",
        "graphs",
        "torch.utils._pytree",
        "tree_flatten",
        "make_graphed_callables (graphs.py): a callable's outputs flattened into the tensors a graph holds",
        f"{NO_PUBLIC_API}: torch.utils._pytree is what torch.cuda.make_graphed_callables uses",
    ),
    Touchpoint(
        "graphs.tree_unflatten",
        "graphs",
        "torch.utils._pytree",
        "tree_unflatten",
        "make_graphed_callables (graphs.py): a replay's outputs given the structure the callable returned",
        f"{NO_PUBLIC_API}: torch.utils._pytree is what torch.cuda.make_graphed_callables uses",
    ),
    Touchpoint(
        "graphs.tree_leaves",
        "graphs",
        "torch.utils._pytree",
        "tree_leaves",
        "make_graphed_callables (graphs.py): the tensors among a callable's outputs",
        f"{NO_PUBLIC_API}: torch.utils._pytree is what torch.cuda.make_graphed_callables uses",
    ),
    Touchpoint(
        "graphs.arg_tree_leaves",
        "graphs",
        "torch.utils._pytree",
        "arg_tree_leaves",
        "make_graphed_callables (graphs.py): the tensors among a call's arguments",
        f"{NO_PUBLIC_API}: torch.utils._pytree is what torch.cuda.make_graphed_callables uses",
    ),
    # --- dynamo: checked when torch._dynamo loads (compiler.py)
    Touchpoint(
        "dynamo.module",
        "dynamo",
        "torch._dynamo",
        "",
        "compiler.py registers the device with Dynamo right after this module loads (an import hook on "
        "its name: import torch_foo stays as fast as before)",
        f"{NO_PUBLIC_API}: torch registers no Dynamo support for a PrivateUse1 device when its compiler "
        "loads (2.15 documents registering at the package's import, which would load the compiler)",
        kind="module",
    ),
    Touchpoint(
        "dynamo.DeviceInterface",
        "dynamo",
        "torch._dynamo.device_interface",
        "DeviceInterface",
        "the base class of the device interface Dynamo and Inductor drive the device through (_dynamo.py)",
        f"{NO_PUBLIC_API} (the accelerator documentation names the private class)",
        kind="class",
    ),
    Touchpoint(
        "dynamo.register_interface_for_device",
        "dynamo",
        "torch._dynamo.device_interface",
        "register_interface_for_device",
        "registers the interface under the device name; nothing registers one for a PrivateUse1 device",
        f"{NO_PUBLIC_API} (it registers torch's own devices itself, and nothing from the device module)",
        parameters=("device", "device_interface"),
    ),
    Touchpoint(
        "dynamo.caching_worker_current_devices",
        "dynamo",
        "torch._dynamo.device_interface",
        "caching_worker_current_devices",
        "the current device as Inductor's compile workers see it (the interface's Worker)",
        kind="value",
    ),
    Touchpoint(
        "dynamo.caching_worker_device_properties",
        "dynamo",
        "torch._dynamo.device_interface",
        "caching_worker_device_properties",
        "device properties recorded in the main process for the compile workers (the interface's Worker)",
        kind="value",
    ),
    Touchpoint(
        "dynamo.in_graph_classes",
        "dynamo",
        "torch._dynamo.variables.user_defined",
        "UserDefinedClassVariable._in_graph_classes",
        "the cached set of classes Dynamo constructs in the graph (torch.Stream, torch.Event and CUDA's, "
        "XPU's and HPU's): the device's Stream and Event are added to it, nothing else (trace_in_graph)",
        "from torch 2.15 on, Dynamo adds the Stream and Event of every registered device interface itself "
        "(torch.Stream and torch.Event subclasses); torch.compiler.allow_in_graph would put a call in the "
        "graph as an opaque function, which cannot return a stream",
        until=(2, 15),
    ),
    # --- inductor: checked when the backend registers (compiler.py: as Inductor's entry point loads, or from
    # torch 2.15 on when Inductor calls the device module's _inductor_backend_init), and by backend="foo"
    Touchpoint(
        "inductor.module",
        "inductor",
        "torch._inductor.compile_fx",
        "",
        "compiler.py registers the Inductor backend right after this module, Inductor's entry point, loads "
        "(an import hook on its name)",
        "from torch 2.15 on, a device module's _inductor_backend_init(), which Inductor calls before its first "
        "compilation for the device (torch.utils.backend_registration) and compiler.py defines; before, "
        "Inductor's lookup through device-module attributes needs all four wrapper attributes, swallows a "
        "missing one, registers no op overrides and is cached on first use",
        kind="module",
        until=(2, 15),
    ),
    Touchpoint(
        "inductor.list_mode_options",
        "inductor",
        "torch._inductor",
        "list_mode_options",
        "the configuration a torch.compile mode stands for, for backend='foo' (compiler.backend)",
        f"{NO_PUBLIC_API} (torch.compile resolves modes only for backend='inductor')",
        parameters=("mode",),
    ),
    Touchpoint(
        "inductor.compile_fx",
        "inductor",
        "torch._inductor.compile_fx",
        "compile_fx",
        "runs Inductor on a graph for backend='foo' (compiler.backend)",
        f"{NO_PUBLIC_API} (a custom backend has no public way to run Inductor with config patches)",
        parameters=("model_", "example_inputs_", "config_patches"),
    ),
    Touchpoint(
        "inductor.register_backend_for_device",
        "inductor",
        "torch._inductor.codegen.common",
        "register_backend_for_device",
        "registers the scheduling and the wrapper code generators under the device name (_inductor/)",
        f"{NO_PUBLIC_API}, though torch 2.15 documents it as the call a device module's _inductor_backend_init() makes",
        parameters=(
            "device",
            "device_scheduling",
            "device_wrapper_codegen",
            "device_cpp_wrapper_codegen",
            "device_fx_wrapper_codegen",
        ),
    ),
    Touchpoint(
        "inductor.register_device_op_overrides",
        "inductor",
        "torch._inductor.codegen.common",
        "register_device_op_overrides",
        "registers the device calls Inductor writes into wrappers (_inductor/wrapper.py)",
        parameters=("device", "device_op_overrides"),
    ),
    Touchpoint(
        "inductor.DeviceOpOverrides",
        "inductor",
        "torch._inductor.codegen.common",
        "DeviceOpOverrides",
        "the base class of the device op overrides (_inductor/wrapper.py)",
        kind="class",
    ),
    Touchpoint(
        "inductor.BaseSchedulerNode.is_cpu",
        "inductor",
        "torch._inductor.scheduler",
        "BaseSchedulerNode.is_cpu",
        "the scheduler asks it whether a node's kernels come from the C++ scheduling (it then skips loop "
        "reordering, reindexing and index inversion, which fail on C++ loop groups); the device's do: "
        "schedule_device_nodes_as_cpp answers for the device's nodes and calls the original for all others",
        f"{NO_PUBLIC_API}: the scheduler asks the node, not the device's scheduling (scheduler.py, three "
        "uses); a scheduling-level query would remove this",
    ),
    Touchpoint(
        "inductor.CppScheduling",
        "inductor",
        "torch._inductor.codegen.cpp",
        "CppScheduling",
        "the C++ scheduling the device's scheduling subclasses (_inductor/scheduling.py)",
        f"{NO_PUBLIC_API} (BaseScheduling is private too)",
        kind="class",
    ),
    Touchpoint(
        "inductor.CppScheduling.codegen_node",
        "inductor",
        "torch._inductor.codegen.cpp",
        "CppScheduling.codegen_node",
        "overridden to generate each kernel with the CPU as the current device (_inductor/scheduling.py)",
        parameters=("self", "node"),
    ),
    Touchpoint(
        "inductor.CppScheduling.define_kernel",
        "inductor",
        "torch._inductor.codegen.cpp",
        "CppScheduling.define_kernel",
        "called through, with the wrapper rewriting the kernel definition it writes into a device kernel "
        "(_inductor/scheduling.py, wrapper.py)",
        parameters=("self", "src_code", "nodes", "kernel_args"),
    ),
    Touchpoint(
        "inductor.cpp_kernel_definition",
        "inductor",
        "torch._inductor.codegen.cpp",
        "CppScheduling.define_kernel",
        "the form of the kernel definition the C++ scheduling hands a Python wrapper, "
        "`async_compile.cpp_pybinding(<argument types>, r'''<source>''')`, which the device's wrapper "
        "rewrites into a device kernel's (_inductor/wrapper.py)",
        f"{NO_PUBLIC_API}: a per-device kernel-definition hook in the C++ scheduling would remove this",
        source_contains="async_compile.cpp_pybinding(",
    ),
    Touchpoint(
        "inductor.V",
        "inductor",
        "torch._inductor.virtualized",
        "V",
        "the graph being compiled (V.graph): its wrapper, current device and scheduler",
        kind="value",
    ),
    Touchpoint(
        "inductor.config",
        "inductor",
        "torch._inductor",
        "config",
        "Inductor's configuration: triton.cudagraphs (refused for the device)",
        kind="value",
    ),
    Touchpoint(
        "inductor.PythonWrapperCodegen",
        "inductor",
        "torch._inductor.codegen.wrapper",
        "PythonWrapperCodegen",
        "the Python wrapper the device's wrapper subclasses (_inductor/wrapper.py)",
        kind="class",
    ),
    Touchpoint(
        "inductor.SubgraphPythonWrapperCodegen",
        "inductor",
        "torch._inductor.codegen.wrapper",
        "SubgraphPythonWrapperCodegen",
        "the subgraph wrapper the device's subgraph wrapper subclasses (_inductor/wrapper.py)",
        kind="class",
    ),
    Touchpoint(
        "inductor.PythonWrapperCodegen._generate_kernel_call_helper",
        "inductor",
        "torch._inductor.codegen.wrapper",
        "PythonWrapperCodegen._generate_kernel_call_helper",
        "overridden: the Python wrapper refuses non-Triton kernel calls for devices other than cpu and mps",
        f"{NO_PUBLIC_API} (no per-device kernel-call hook)",
        parameters=("self", "kernel_name", "call_args", "device", "triton"),
    ),
    Touchpoint(
        "inductor.PythonWrapperCodegen.define_kernel",
        "inductor",
        "torch._inductor.codegen.wrapper",
        "PythonWrapperCodegen.define_kernel",
        "overridden: turns the C++ scheduling's kernel definition into a device kernel's",
        parameters=("self", "kernel_name", "kernel_body", "metadata", "gpu", "cpp_definition"),
    ),
    Touchpoint(
        "inductor.PythonWrapperCodegen.codegen_cuda_stream_enter",
        "inductor",
        "torch._inductor.codegen.wrapper",
        "PythonWrapperCodegen.codegen_cuda_stream_enter",
        "overridden: defines the stream variables Inductor defines only inside GPU device guards",
        parameters=("self", "stream_idx"),
    ),
    Touchpoint(
        "inductor.PythonWrapperCodegen.make_allocation",
        "inductor",
        "torch._inductor.codegen.wrapper",
        "PythonWrapperCodegen.make_allocation",
        "overridden: allocates on the graph's device index (Inductor writes a bare device type)",
        parameters=("self", "name", "device", "dtype", "shape", "stride", "allocation_shape", "is_pinned"),
    ),
    Touchpoint(
        "inductor.PythonWrapperCodegen.write_header",
        "inductor",
        "torch._inductor.codegen.wrapper",
        "PythonWrapperCodegen.write_header",
        "overridden: imports the device's compile_kernel and launch_kernel into generated modules",
        parameters=("self",),
    ),
    Touchpoint(
        "inductor.DEFAULT_STREAM_IDX",
        "inductor",
        "torch._inductor.stream_utils",
        "DEFAULT_STREAM_IDX",
        "the stream index Inductor gives the current stream (_inductor/wrapper.py)",
        kind="value",
    ),
    Touchpoint(
        "inductor.get_stream_name",
        "inductor",
        "torch._inductor.stream_utils",
        "get_stream_name",
        "the variable name Inductor's `with <stream>:` lines use (_inductor/wrapper.py)",
        parameters=("stream_idx",),
    ),
    Touchpoint(
        "inductor.get_external_object_by_index",
        "inductor",
        "torch._dynamo.graph_bytecode_inputs",
        "get_external_object_by_index",
        "written into generated wrappers: the stream object user code passed into the compiled region",
        parameters=("index",),
    ),
    Touchpoint(
        "inductor.get_compile_threads",
        "inductor",
        "torch._inductor.async_compile",
        "get_compile_threads",
        "whether kernels compile in Inductor's workers (_inductor/kernels.py)",
    ),
    Touchpoint(
        "inductor.CppCodeCache",
        "inductor",
        "torch._inductor.codecache",
        "CppCodeCache",
        "Inductor's C++ compile cache, subclassed to produce plain shared libraries (_inductor/kernels.py)",
        f"{NO_PUBLIC_API} (no public way to compile C++ with Inductor's toolchain and cache)",
        kind="class",
    ),
    Touchpoint(
        "inductor.CppCodeCache.load_async",
        "inductor",
        "torch._inductor.codecache",
        "CppCodeCache.load_async",
        "compiles a kernel in Inductor's workers (_inductor/kernels.py)",
        parameters=("main_code", "device_type", "submit_fn"),
    ),
    Touchpoint(
        "inductor.CppCodeCache.load",
        "inductor",
        "torch._inductor.codecache",
        "CppCodeCache.load",
        "compiles a kernel in this process (_inductor/kernels.py)",
    ),
    Touchpoint(
        "inductor.CppCodeCache._load_library_inner",
        "inductor",
        "torch._inductor.codecache",
        "CppCodeCache._load_library_inner",
        "overridden: the device loads the library itself (_inductor/kernels.py)",
        parameters=("path", "key"),
    ),
    Touchpoint(
        "inductor.CppCodeCache._get_uncompiled_header",
        "inductor",
        "torch._inductor.codecache",
        "CppCodeCache._get_uncompiled_header",
        "overridden: the header every kernel starts with, precompiled once (_inductor/kernels.py)",
        parameters=("device",),
    ),
    Touchpoint(
        "inductor.CppCodeCache.cpp_compile_command_flags",
        "inductor",
        "torch._inductor.codecache",
        "CppCodeCache.cpp_compile_command_flags",
        "overridden: compile flags of the device's kernels (no libtorch, shared library)",
        kind="value",
    ),
    Touchpoint(
        "inductor.get_cpp_prefix_header",
        "inductor",
        "torch._inductor.codecache",
        "_get_cpp_prefix_header",
        "the header Inductor's C++ kernels start with, for precompiling (_inductor/kernels.py)",
        parameters=("device",),
    ),
    Touchpoint(
        "inductor.LambdaFuture",
        "inductor",
        "torch._inductor.codecache",
        "LambdaFuture",
        "the future compile_kernel returns while a worker compiles (_inductor/kernels.py)",
        kind="class",
    ),
    Touchpoint(
        "inductor.clear_on_fresh_cache",
        "inductor",
        "torch._inductor.utils",
        "clear_on_fresh_cache",
        "clears the device's kernel cache with Inductor's (fresh_cache in tests)",
    ),
    # --- distributed: checked when the c10d backend registers (distributed.py, at import)
    Touchpoint(
        "distributed.ProcessGroup._register_backend",
        "distributed",
        "torch.distributed",
        "ProcessGroup._register_backend",
        "builds the process group around the fooccl backend for each device type (distributed.py)",
        f"{NO_PUBLIC_API}: torch has no public way to build a group; pytorch/pytorch#189193 fixes the "
        "broken default backend that makes building our own necessary",
        parameters=("device", "backend_type", "backend"),
    ),
    Touchpoint(
        "distributed.ProcessGroup._set_default_backend",
        "distributed",
        "torch.distributed",
        "ProcessGroup._set_default_backend",
        "makes fooccl the group's default backend, which DDP's constructor asks for (distributed.py)",
        f"{NO_PUBLIC_API} (see distributed.ProcessGroup._register_backend)",
        parameters=("backend_type",),
    ),
    Touchpoint(
        "distributed.ProcessGroup.BackendType.CUSTOM",
        "distributed",
        "torch.distributed",
        "ProcessGroup.BackendType.CUSTOM",
        "the backend type torch gives a registered third-party backend (distributed.py)",
        kind="value",
    ),
)

_BY_NAME = {touchpoint.name: touchpoint for touchpoint in TOUCHPOINTS}
FEATURES = tuple(dict.fromkeys(touchpoint.feature for touchpoint in TOUCHPOINTS))


def applicable() -> tuple[Touchpoint, ...]:
    """The touchpoints of the running torch release (Touchpoint.since, until)."""
    return tuple(entry for entry in TOUCHPOINTS if entry.applies())


_checked: set[str] = set()


class TorchCompatError(RuntimeError):
    """A private torch API torch_foo needs is missing or has another shape in this torch."""

    def __init__(self, problems: dict[str, str]):
        self.problems = dict(problems)
        self.touchpoints = tuple(problems)
        lines = []
        for name, problem in problems.items():
            touchpoint = _BY_NAME[name]
            lines.append(
                f"  - {name} ({touchpoint.where}): {problem}. Used for: {touchpoint.what}. "
                f"Public alternative: {touchpoint.public_alternative}."
            )
        super().__init__(
            f"torch_foo needs private PyTorch API that torch {torch.__version__} does not provide as "
            f"torch_foo expects (checked with torch {CHECKED_WITH}):\n"
            + "\n".join(lines)
            + "\nUse a torch release the backend supports, or adapt torch_foo/_compat.py and its users "
            "to this release."
        )


def touchpoint(name: str) -> Touchpoint:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"torch_foo._compat: no touchpoint named {name!r}") from None


def _lookup(entry: Touchpoint) -> Any:
    obj = importlib.import_module(entry.module)
    for part in filter(None, entry.attribute.split(".")):
        obj = getattr(obj, part)
    return obj


def resolve(name: str) -> Any:
    """The object behind touchpoint `name`; raises TorchCompatError naming it if torch lacks it."""
    entry = touchpoint(name)
    if not entry.applies():
        raise TorchCompatError({name: f"not a touchpoint of this torch release (it is {_releases(entry)})"})
    try:
        return _lookup(entry)
    except (ImportError, AttributeError) as error:
        raise TorchCompatError({name: f"missing ({error})"}) from error


def _releases(entry: Touchpoint) -> str:
    since = "{}.{}".format(*entry.since)
    return f"from torch {since}" + (" to {}.{}, excluded".format(*entry.until) if entry.until else "")


def _parameter_names(obj: Any) -> set[str] | None:
    """The parameter names of a function or method; None where they cannot be read cheaply."""
    try:
        return set(inspect.signature(obj).parameters)
    except (TypeError, ValueError):  # a C function: pybind11 writes the signature into the docstring
        doc = getattr(obj, "__doc__", None) or ""
        names = set(re.findall(r"[(,]\s*(\w+)\s*:", doc))
        return names or None


def _problem(entry: Touchpoint) -> str | None:
    try:
        obj = _lookup(entry)
    except (ImportError, AttributeError) as error:
        return f"missing ({error})"
    if entry.kind == "module" and not isinstance(obj, types.ModuleType):
        return f"is {type(obj).__name__}, expected a module"
    if entry.kind == "class" and not isinstance(obj, type):
        return f"is {type(obj).__name__}, expected a class"
    if entry.kind == "callable" and not callable(obj):
        return f"is {type(obj).__name__}, expected a function"
    if entry.parameters:
        names = _parameter_names(obj)
        if names is not None:
            missing = [parameter for parameter in entry.parameters if parameter not in names]
            if missing:
                return f"has no parameter {', '.join(missing)} (its parameters: {', '.join(sorted(names))})"
    if entry.source_contains:
        try:
            source = inspect.getsource(obj)
        except (OSError, TypeError):  # no source installed: nothing to read the format from
            source = None
        if source is not None and entry.source_contains not in source:
            return f"no longer contains {entry.source_contains!r}"
    return None


def problems(feature: str) -> dict[str, str]:
    """Touchpoint name -> what is wrong with it, for the touchpoints of `feature` (empty: all fine)."""
    if feature not in FEATURES:
        raise ValueError(f"torch_foo._compat: no feature {feature!r} (features: {', '.join(FEATURES)})")
    found = {}
    for entry in TOUCHPOINTS:
        if entry.feature == feature and entry.applies():
            problem = _problem(entry)
            if problem is not None:
                found[entry.name] = problem
    return found


def check(feature: str) -> None:
    """The self-test of `feature`'s touchpoints: raises TorchCompatError naming each one that changed.
    Once it passed, checking the same feature again costs nothing."""
    if feature in _checked:
        return
    found = problems(feature)
    if found:
        raise TorchCompatError(found)
    _checked.add(feature)


# --- The replacements that remain where torch has no registration API, scoped to the device.

_MARK = "_torch_foo_device_type"


def linear_cross_entropy_as_cpu(name: str) -> None:
    """Gives device type `name` the CPU's "auto" accumulation policy and dtype in F.linear_cross_entropy's
    chunked path (touchpoints numerics.*, which say why; _numerics.py decides to). For every other
    device torch's own functions answer. Idempotent. Raises TorchCompatError if "numerics" changed."""
    check("numerics")
    resolve_dtype = resolve("numerics.linear_cross_entropy_resolve")
    options = owner("numerics.linear_cross_entropy_resolve")
    if getattr(resolve_dtype, _MARK, None) == name:
        return
    # The policy is chosen in a function of the device type, which the module calls by its global name.
    policy = resolve("numerics.linear_cross_entropy_policy")
    where = touchpoint("numerics.linear_cross_entropy_policy")

    def policy_as_cpu(device_type: str | None, dtype: torch.dtype) -> str:  # the parameters torch passes
        return policy("cpu" if device_type == name else device_type, dtype)

    def resolve_as_cpu(dtype: torch.dtype, device: torch.device | None) -> torch.dtype | None:
        if device is not None and device.type == name:
            device = torch.device("cpu")
        return resolve_dtype(dtype, device)

    for replacement, original in ((policy_as_cpu, policy), (resolve_as_cpu, resolve_dtype)):
        setattr(replacement, _MARK, name)
        replacement.__wrapped__ = original
    setattr(sys.modules[where.module], where.attribute, policy_as_cpu)
    options._resolve_auto_acc_dtype = staticmethod(resolve_as_cpu)


class _ModuleMethod:
    """`Module.<name>(device=None)` as torch generated it, except that a submodule of that name comes first."""

    def __init__(self, method: Any, name: str):
        self.__wrapped__ = method
        self.__doc__ = method.__doc__
        setattr(self, _MARK, name)

    def __get__(self, module: Any, owner: Any = None) -> Any:
        if module is None:
            return self.__wrapped__
        submodules = module.__dict__.get("_modules")
        name = getattr(self, _MARK)
        if submodules is not None and name in submodules:
            return submodules[name]
        return self.__wrapped__.__get__(module, owner)


def let_submodules_hide_the_module_method(name: str) -> None:
    """Wraps `torch.nn.Module.<name>`, the method torch.utils.generate_methods_for_privateuse1_backend
    adds for the device, so that a submodule of that name comes first: a class attribute hides what
    `Module.__getattr__` finds, so for a backend named mlp, GPT-2's `self.mlp(x)` would call the
    method (`module.to(device=x)`). Other modules get torch's method. Idempotent."""
    method = torch.nn.Module.__dict__[name]
    if getattr(method, _MARK, None) == name:
        return
    setattr(torch.nn.Module, name, _ModuleMethod(method, name))


def schedule_device_nodes_as_cpp(device_type: str) -> None:
    """Makes Inductor's scheduler treat `device_type`'s nodes as the CPU's: their kernels come from the
    C++ scheduling (touchpoint inductor.BaseSchedulerNode.is_cpu says why). For every other node the
    original method answers. Idempotent."""
    resolve("inductor.BaseSchedulerNode.is_cpu")
    node_class = owner("inductor.BaseSchedulerNode.is_cpu")
    original = node_class.__dict__["is_cpu"]
    if getattr(original, _MARK, None) == device_type:
        return

    def is_cpu(self: Any) -> bool:
        device = self.get_device()
        if device is not None and device.type == device_type:
            return True
        return original(self)

    setattr(is_cpu, _MARK, device_type)
    is_cpu.__wrapped__ = original
    is_cpu.__doc__ = original.__doc__
    node_class.is_cpu = is_cpu


def trace_in_graph(*classes: type) -> None:
    """Lets Dynamo construct instances of `classes` (the device's Stream and Event, subclasses of
    torch.Stream and torch.Event) in the graph, as it does torch.Stream. Adds them only."""
    in_graph = resolve("dynamo.in_graph_classes")()
    in_graph.update(classes)


# --- Code to run right after torch imports one of its modules (compiler.py registers the compiler so).
# Python has no post-import hook (PEP 369 was withdrawn) and torch makes no registration call for a
# PrivateUse1 device when its compiler loads. So a finder at the front of sys.meta_path wraps the
# loader of the awaited modules only: it finds nothing itself, the module's own loader runs unchanged,
# then the callback.

# torch module -> what runs once it has loaded; emptied as they load.
_after_import: dict[str, Callable[[], None]] = {}


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the callback waiting for it."""

    def __init__(self, loader: Any, module_name: str):
        self.loader = loader
        self.module_name = module_name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # the module keeps its real loader
        self.loader.exec_module(module)
        callback = _after_import.pop(self.module_name, None)
        if callback is not None:
            callback()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of the modules ``_after_import`` waits for."""

    marker = "torch_foo"

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in _after_import:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, name)
                return spec
        return None


def after_import(module_name: str, callback: Callable[[], None]) -> None:
    """Runs `callback` once torch module `module_name` has loaded: now if it has, else right after
    its import, before anything can use it. A module already waited for keeps its first callback."""
    if module_name in sys.modules:
        _after_import.pop(module_name, None)
        callback()
        return
    _after_import.setdefault(module_name, callback)
    if not any(getattr(finder, "marker", None) == _AfterImport.marker for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


def owner(name: str) -> type:
    """The class that holds touchpoint `name` (an attribute of a class)."""
    entry = touchpoint(name)
    path, _, _ = entry.attribute.rpartition(".")
    obj = importlib.import_module(entry.module)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj

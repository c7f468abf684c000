"""torch.compile on the device: Dynamo traces device code (streams, events, device properties) and
Inductor's kernels run on the device, launched on the current stream like every other kernel. Each
result is compared with eager on the device and with the CPU. Strict memory mode stays on (conftest),
so a compiled kernel that touched device memory without the runtime's address translation would crash.

The compile cache lives in a temporary directory for the session; the first compile builds
Inductor's precompiled header, so this file takes a few minutes on a small machine."""

import copy
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn as nn
from torch._dynamo.testing import CompileCounterWithBackend
from torch._inductor.utils import run_and_get_code
from torch.testing import assert_close

import torch_foo

pytestmark = pytest.mark.slow  # minutes per run: pytest -m "not slow" leaves this file out

DEVICE = torch.device("foo", 0)
ROOT = Path(__file__).resolve().parent.parent
TOL = {"rtol": 1e-4, "atol": 1e-5}
# Generated kernels: Inductor's C++ with a device entry point (_inductor/scheduling.py).
KERNEL_PREFIX = "cpp"
SCHEDULING = "scheduling.FooScheduling"


@pytest.fixture(scope="module", autouse=True)
def _compile_cache(tmp_path_factory):
    """Inductor's caches (generated code, compiled kernels, precompiled headers) in a directory of this
    session, so every run compiles what it tests; strict memory mode must still be on."""
    assert os.environ.get("FOO_STRICT_MEMORY") == "1"
    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("inductor"))
    yield
    torch._dynamo.reset()
    if previous is None:
        del os.environ["TORCHINDUCTOR_CACHE_DIR"]
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()


def counter() -> CompileCounterWithBackend:
    """An Inductor backend that counts the graphs it compiles."""
    return CompileCounterWithBackend("inductor")


def launches(code: str) -> int:
    """How many device kernel launches a generated wrapper module contains."""
    return code.count("launch_kernel(")


MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)), (8, 16)),
    "cnn": (
        lambda: nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 4)
        ),
        (4, 3, 8, 8),
    ),
    "transformer": (lambda: nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), (2, 5, 16)),
}


def train(model: nn.Module, device: torch.device, inputs: list[torch.Tensor], compiled: bool) -> tuple[list, nn.Module]:
    """A few SGD steps with momentum; returns the losses (as tensors) and the trained model."""
    model = copy.deepcopy(model).to(device)
    step = torch.compile(model) if compiled else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x in inputs:
        optimizer.zero_grad()
        loss = step(x.to(device)).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return losses, model


@pytest.mark.parametrize("name", MODELS)
def test_compiled_training_matches_eager_and_cpu(name):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make()
    g = torch.Generator().manual_seed(1)
    inputs = [torch.randn(*shape, generator=g) for _ in range(3)]
    compiled_losses, compiled = train(model, DEVICE, inputs, compiled=True)
    eager_losses, eager = train(model, DEVICE, inputs, compiled=False)
    cpu_losses, cpu = train(model, torch.device("cpu"), inputs, compiled=False)
    for reference_losses, reference in ((eager_losses, eager), (cpu_losses, cpu)):
        assert_close([loss.cpu() for loss in compiled_losses], [loss.cpu() for loss in reference_losses], **TOL)
        for (key, p), q in zip(compiled.state_dict().items(), reference.state_dict().values(), strict=True):
            assert p.device == DEVICE, key
            assert_close(p.cpu(), q.cpu(), **TOL, msg=key)


def test_fused_elementwise_graph_is_one_device_kernel():
    def f(x, y):
        return (x * 2 + y).relu().sin() - y

    x, y = torch.randn(1000), torch.randn(1000)
    out, (code,) = run_and_get_code(torch.compile(f), x.to(DEVICE), y.to(DEVICE))
    # One fused kernel, compiled for the device and launched on it; no CPU kernel, no extern call.
    assert launches(code) == 1
    assert "compile_kernel(" in code and "cpp_pybinding" not in code
    assert "extern_kernels" not in code.split("def call")[1]
    assert out.device == DEVICE
    assert_close(out.cpu(), f(x, y))
    assert_close(out, f(x.to(DEVICE), y.to(DEVICE)))


def test_compiled_kernels_run_on_the_current_stream_in_order():
    f = torch.compile(lambda x: x * 2 + 1)
    f(torch.ones(4096, device=DEVICE))  # compile first
    x = torch.ones(4096, device=DEVICE)
    torch_foo.synchronize()

    stream = torch_foo.Stream()
    with torch_foo.stream(stream):
        x.add_(1)  # eager work on the user's stream, after a busy wait on it
        torch_foo.streams._sleep(200_000)
        x.mul_(3)
        y = f(x)  # queued behind the eager work: must see x == 6
    assert not stream.query()  # the call returned while the stream still works: it did not wait
    assert torch_foo.current_stream().query()  # nothing went to the default stream
    stream.synchronize()
    assert_close(y.cpu(), torch.full((4096,), 13.0))


def test_streams_and_events_compile_without_graph_breaks():
    def f(x):
        side = torch_foo.Stream()
        done = torch_foo.Event()
        y = x * 2
        side.wait_stream(torch_foo.current_stream())
        with torch_foo.stream(side):
            z = y.sin() + 1
            done.record()
        done.wait()
        props = torch_foo.get_device_properties(x.device)
        return z * props.multi_processor_count + torch_foo.device_count()

    x = torch.randn(256, device=DEVICE)
    out = torch.compile(f, fullgraph=True)(x)
    props = torch_foo.get_device_properties(DEVICE)
    expected = (x.cpu() * 2).sin().add(1) * props.multi_processor_count + torch_foo.device_count()
    assert_close(out.cpu(), expected)
    assert_close(out, f(x))


def test_the_device_interface_answers_what_dynamo_and_inductor_ask():
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device("foo")
    assert get_interface_for_device(DEVICE) is interface
    assert issubclass(interface.Stream, torch.Stream) and issubclass(interface.Event, torch.Event)
    assert interface.is_available() and interface.device_count() == torch_foo.device_count()
    if interface.device_count() > 1:
        assert interface.exchange_device(1) == 0 and interface.current_device() == 1
        assert interface.maybe_exchange_device(0) == 1 and interface.current_device() == 0
    assert interface.exchange_device(-1) == -1 and interface.current_device() == 0
    assert interface.get_raw_stream(0) == 0  # the default stream, as for CUDA
    with interface.stream(torch_foo.Stream()):
        assert interface.get_raw_stream(0) != 0
        assert interface.current_stream() != torch_foo.default_stream()
    properties = interface.Worker.get_device_properties("foo:0")
    assert properties == torch_foo.get_device_properties(0)
    major, minor = torch_foo.get_device_capability(0)
    assert interface.get_compute_capability(0) == major * 10 + minor
    assert interface.is_bf16_supported() and not interface.is_triton_capable()
    # Inductor's on-disk cache keys on the code generator: a build of this name with the other driver
    # must not load these compiled modules.
    scheduling = ".scheduling.FooScheduling"
    assert interface.get_cache_system_info() == {"scheduling": scheduling}
    interface.synchronize(0)


def test_dynamic_shapes_compile_once_for_three_sizes():
    backend = counter()
    f = torch.compile(lambda x: (x * 2).tanh() + x.sum(), backend=backend, dynamic=True)
    for n in (5, 17, 64):
        x = torch.randn(n)
        assert_close(f(x.to(DEVICE)).cpu(), (x * 2).tanh() + x.sum(), **TOL)
    assert backend.frame_count == 1


def test_a_new_dtype_recompiles():
    backend = counter()
    f = torch.compile(lambda x: x.exp() * 3, backend=backend)
    for dtype in (torch.float32, torch.float64):
        x = torch.linspace(-1, 1, 16, dtype=dtype)
        out = f(x.to(DEVICE))
        assert out.dtype == dtype
        assert_close(out.cpu(), x.exp() * 3)
    assert backend.frame_count == 2


def test_autocast_inside_a_compiled_function():
    def f(a, b):
        with torch.autocast("foo", dtype=torch.bfloat16):
            return (a @ b).relu() + 1

    a, b = torch.randn(8, 8), torch.randn(8, 8)
    out = torch.compile(f, fullgraph=True)(a.to(DEVICE), b.to(DEVICE))
    assert out.dtype == torch.bfloat16
    assert_close(out, f(a.to(DEVICE), b.to(DEVICE)), atol=1e-2, rtol=1e-2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu = (a @ b).relu() + 1
    assert_close(out.cpu(), cpu, atol=3e-2, rtol=3e-2)


def test_custom_operator_inside_a_compiled_graph():
    def f(x, bias):
        return torch.ops.torch_foo.bias_gelu(x * 2, bias) - 1

    x, bias = torch.randn(4, 8), torch.randn(8)
    out, (code,) = run_and_get_code(torch.compile(f, fullgraph=True), x.to(DEVICE), bias.to(DEVICE))
    assert "torch.ops.torch_foo.bias_gelu.default" in code  # called on the device, traced by its fake kernel
    assert_close(out.cpu(), torch.nn.functional.gelu(x * 2 + bias) - 1, **TOL)


def test_aot_eager_training():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    inputs = [torch.randn(4, 8) for _ in range(2)]
    reference_losses, reference = train(model, torch.device("cpu"), inputs, compiled=False)
    device_model = copy.deepcopy(model).to(DEVICE)
    step = torch.compile(device_model, backend="aot_eager")
    optimizer = torch.optim.SGD(device_model.parameters(), lr=0.05, momentum=0.9)
    for x, expected in zip(inputs, reference_losses, strict=True):
        optimizer.zero_grad()
        loss = step(x.to(DEVICE)).square().mean()
        loss.backward()
        optimizer.step()
        assert_close(loss.cpu(), expected, **TOL)
    for p, q in zip(device_model.parameters(), reference.parameters(), strict=True):
        assert_close(p.cpu(), q, **TOL)


@pytest.mark.skipif(torch.foo.device_count() < 2, reason="needs two devices")
def test_a_graph_on_another_device_runs_there():
    last = torch.device("foo", torch.foo.device_count() - 1)
    x, y = torch.randn(100), torch.randn(100)
    out, (code,) = run_and_get_code(torch.compile(lambda a, b: (a + b).cos()), x.to(last), y.to(last))
    assert out.device == last
    assert f"launch_kernel({KERNEL_PREFIX}_fused_add_cos_0, {last.index}," in code
    assert_close(out.cpu(), (x + y).cos())


def test_a_failing_compiled_kernel_is_reported_at_synchronisation():
    f = torch.compile(lambda a, b: a // b)
    out = f(torch.arange(4, device=DEVICE), torch.zeros(4, dtype=torch.int64, device=DEVICE))
    # The runtime's message names the generated kernel and carries the kernel's own error.
    with pytest.raises(RuntimeError, match=f"{KERNEL_PREFIX}_fused_floor_divide_0: .*ZeroDivisionError"):
        torch.foo.synchronize()
    del out


@pytest.mark.parametrize(
    ("options", "message"),
    [({"mode": "reduce-overhead"}, "cudagraph trees"), ({"options": {"cpp_wrapper": True}}, "C\\+\\+ wrapper")],
)
def test_modes_the_device_lacks_raise_a_clear_error(options, message):
    f = torch.compile(lambda x: x.sin() + 1, **options)
    with pytest.raises(Exception, match=message):
        f(torch.ones(3, device=DEVICE))


def test_the_device_name_is_a_compile_backend_running_inductor_for_the_device():
    # Where a hardware team's own graph compiler goes (torch_foo/compiler.py, backend()).
    assert "foo" in torch._dynamo.list_backends()

    def f(x, y):
        return (x * 2 + y).relu().sin() - y

    x, y = torch.randn(1000), torch.randn(1000)
    out, (code,) = run_and_get_code(torch.compile(f, backend="foo"), x.to(DEVICE), y.to(DEVICE))
    assert launches(code) == 1
    assert out.device == DEVICE
    assert_close(out.cpu(), f(x, y))
    # Modes and options as for backend="inductor", refused where the device lacks them.
    with_options = torch.compile(f, backend="foo", options={"max_autotune": False})
    assert_close(with_options(x.to(DEVICE), y.to(DEVICE)).cpu(), f(x, y))
    with pytest.raises(Exception, match="cudagraph trees"):
        torch.compile(f, backend="foo", mode="reduce-overhead")(x.to(DEVICE), y.to(DEVICE))


def compile_hand_written_kernel(source: str, name: str, arg_types: list[str]) -> Any:
    """The library built from C++ `source` defining `kernel` and its entry point `name`, the way
    Inductor's kernels are built."""
    from torch_foo._inductor.kernels import FooKernelCodeCache
    from torch_foo._inductor.scheduling import kernel_entry

    return FooKernelCodeCache.load(source + kernel_entry(name, "kernel", arg_types), "cpu")


SCALE = """
    #include <cstdint>
    #include <stdexcept>
    extern "C" void kernel(const float* in, float* out, const int64_t n, const float scale) {
      if (n < 0) throw std::invalid_argument("a negative length");
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] * scale;
    }
"""
SCALE_ARGS = ["const float*", "float*", "const int64_t", "const float"]


def test_a_hand_written_kernel_runs_on_the_device_and_bad_launches_raise():
    kernel = compile_hand_written_kernel(SCALE, "scale", SCALE_ARGS).kernel("scale", len(SCALE_ARGS))
    launch = torch_foo._C._launch_compiled_kernel
    x = torch.arange(6.0, device=DEVICE)
    out = torch.zeros(6, device=DEVICE)
    launch(kernel, 0, x, out, 5, 0.5)
    assert_close(out.cpu(), torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 0.0]))

    with pytest.raises(RuntimeError, match="not a loaded compiled kernel"):
        launch(kernel + 1, 0, x, out, 5, 0.5)
    with pytest.raises(RuntimeError, match="expected 4 arguments, got 3"):
        launch(kernel, 0, x, out, 5)
    with pytest.raises(RuntimeError, match="argument 1 is on cpu"):
        launch(kernel, 0, x, torch.zeros(6), 5, 0.5)
    with pytest.raises(RuntimeError, match="argument 2 is neither a tensor nor a number"):
        launch(kernel, 0, x, out, "5", 0.5)
    with pytest.raises(RuntimeError, match="Invalid foo device index"):
        launch(kernel, 99, x, out, 5, 0.5)

    # An exception inside the kernel fails the launch: the runtime reports it, with the kernel's
    # name and message, at the next synchronisation, and the stream works again afterwards.
    launch(kernel, 0, x, out, -1, 0.5)
    with pytest.raises(RuntimeError, match="kernel scale: a negative length"):
        torch.foo.synchronize()
    launch(kernel, 0, x, out, 6, 2.0)
    assert_close(out.cpu(), torch.arange(6.0) * 2)


def test_loading_a_missing_library_or_kernel_raises_the_runtimes_error(tmp_path):
    load = torch_foo._C._load_compiled_kernel
    with pytest.raises(RuntimeError, match="cannot load module .*missing.so"):
        load(str(tmp_path / "missing.so"), "scale", 4)
    library = compile_hand_written_kernel(SCALE, "scale", SCALE_ARGS)
    with pytest.raises(RuntimeError, match="no kernel named kernel_that_is_not_there"):
        load(library.path, "kernel_that_is_not_there", 4)


def test_generated_kernels_declare_the_runtimes_launch_context(tmp_path):
    """Kernels are compiled without the project's headers: the launch context they declare
    (scheduling.KERNEL_ABI) must have the layout of the runtime's, field by field."""
    from torch._inductor.cpp_builder import get_cpp_compiler

    from torch_foo._inductor.scheduling import KERNEL_ABI

    header = ROOT / "csrc" / "runtime" / "emulation.h"
    if not header.exists():
        pytest.skip("a port without the emulated device defines its own kernel format")
    body = re.search(r"typedef struct fooEmuKernelContext \{(.*?)\}", header.read_text(), re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    fields = [re.search(r"\(\*(\w+)\)|(\w+)\s*$", decl.strip()).group(1, 2) for decl in body.split(";") if decl.strip()]
    names = [pointer or plain for pointer, plain in fields]
    assert names == ["gridDim", "blockDim", "blockIdx", "sharedMem", "address", "fail"]
    checks = ['static_assert(sizeof(ours) == sizeof(theirs), "size");'] + [
        f'static_assert(offsetof(ours, {n}) == offsetof(theirs, {n}), "{n}");\n'
        f'static_assert(sizeof(ours::{n}) == sizeof(theirs::{n}), "{n}");'
        for n in names
    ]
    source = tmp_path / "abi.cpp"
    source.write_text(
        f'#include <cstddef>\n#include <cstdint>\n#include "{header}"\n'
        + "namespace generated {\n"
        + KERNEL_ABI
        + "}\nusing ours = generated::fooEmuKernelContext;\nusing theirs = fooEmuKernelContext;\n"
        + "\n".join(checks)
        + "\n"
    )
    result = subprocess.run(
        [get_cpp_compiler(), "-std=c++17", "-fsyntax-only", str(source)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_registration_waits_for_the_compiler_and_works_in_either_import_order(run_python):
    code = """
        import sys, torch, torch_foo
        assert "torch._dynamo" not in sys.modules and "torch._inductor" not in sys.modules, "imported the compiler"
        f = torch.compile(lambda x: x.cos() * 2)
        x = torch.randn(8, device="foo")
        torch.testing.assert_close(f(x).cpu(), x.cpu().cos() * 2)
        print("ok")
    """
    first_compiler = """
        import torch, torch._dynamo, torch._inductor.compile_fx
        import torch_foo
        from torch._dynamo.device_interface import get_interface_for_device
        from torch._inductor.codegen.common import get_scheduling_for_device
        from torch._inductor.codegen.common import init_backend_registration
        assert get_interface_for_device("foo") is torch_foo._dynamo.FooInterface
        init_backend_registration()  # what Inductor calls first (torch 2.15: the device module's hook)
        assert get_scheduling_for_device("foo") is torch_foo._inductor.SCHEDULING_CLASS
        print("ok")
    """.replace("SCHEDULING_CLASS", SCHEDULING)
    for source in (code, first_compiler):
        result = run_python(source, TORCHINDUCTOR_CACHE_DIR=os.environ["TORCHINDUCTOR_CACHE_DIR"])
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith("ok")

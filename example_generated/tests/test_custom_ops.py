"""Custom operators: torch.ops.torch_foo.bias_gelu has a foo kernel, a CPU kernel, autograd
and a fake kernel, checked by torch.library.opcheck and against gelu(x + bias) computed by PyTorch."""

import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_foo
from torch_foo import ops

op = torch.ops.torch_foo.bias_gelu
DEVICES = ["cpu", "foo"]
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
TOL = {torch.float16: {"atol": 2e-3, "rtol": 2e-3}, torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2}}


def inputs(shape, device, dtype=torch.float32, requires_grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, generator=g) * 2).to(device=device, dtype=dtype).requires_grad_(requires_grad)
    bias = torch.randn(shape[-1], generator=g).to(device=device, dtype=dtype).requires_grad_(requires_grad)
    return x, bias


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("shape", [(8,), (3, 5), (2, 3, 4), (0, 4)])
def test_opcheck(device, requires_grad, shape):
    # Schema, autograd registration, fake kernel against the real one, and AOT dispatch. opcheck's
    # autograd registration check knows only CPU, CUDA and XPU tensors (torch 2.13 to 2.15): for the device
    # it runs on CPU inputs here, and test_autograd_kernel_covers_the_device checks the device key.
    tests = OPCHECK_TESTS if device == "cpu" else tuple(t for t in OPCHECK_TESTS if t != "test_autograd_registration")
    torch.library.opcheck(op, inputs(shape, device, requires_grad=requires_grad), test_utils=tests)


def test_autograd_kernel_covers_the_device():
    # register_autograd registers for the Autograd alias key, which includes the device's; without
    # it the device key would show the autograd backend fallback.
    table = torch._C._dispatch_dump_table("torch_foo::bias_gelu").splitlines()
    entry = next(line for line in table if line.startswith("AutogradPrivateUse1:"))
    assert "[autograd kernel]" in entry and "fallback" not in entry


def test_opcheck_non_contiguous_input():
    x = torch.randn(6, 4, device="foo").t()  # shape (4, 6), strides (1, 4)
    torch.library.opcheck(op, (x, torch.randn(6, device="foo")))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_forward_matches_gelu_of_sum(dtype):
    x, bias = inputs((4, 7), "cpu", dtype)
    expected = F.gelu(x.double() + bias.double()).to(dtype)
    for device in DEVICES:
        result = op(x.to(device), bias.to(device))
        assert result.device.type == device and result.dtype == dtype
        assert_close(result.cpu(), expected, **TOL.get(dtype, {}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_and_backward_are_accurate_over_the_whole_range(dtype):
    # Every float erf regime: the polynomial below |z / sqrt(2)| = 1, the exponential tail above,
    # the clamp (3.92) and past it, and a length that is no multiple of a work-group (vectorised
    # kernels on a CPU driver). Against gelu in double, so the bound is the kernel's own error.
    special = [0.0, -0.0, 1e-30, -1e-30, 1e-8, 1.4142, 1.41422, 5.5437, 5.5438, 12.0, -12.0]
    z = torch.cat([torch.linspace(-9, 9, 200_003, dtype=torch.float64), torch.tensor(special, dtype=torch.float64)])
    z = z.to(dtype).double()
    bias = torch.zeros(z.numel(), dtype=torch.float64)
    out = op(z.to("foo", dtype), bias.to("foo", dtype)).cpu().double()
    tol = {"atol": 1e-6, "rtol": 3e-6} if dtype == torch.float32 else {"atol": 1e-14, "rtol": 1e-13}
    assert_close(out, F.gelu(z), **tol)
    nan = torch.tensor([math.nan], dtype=dtype)
    assert op(nan.to("foo"), torch.zeros_like(nan).to("foo")).isnan().all()
    x = z.to("foo", dtype).requires_grad_()
    op(x, bias.to("foo", dtype)).backward(torch.ones_like(x))
    reference = z.clone().requires_grad_()
    F.gelu(reference).backward(torch.ones_like(reference))
    assert_close(x.grad.cpu().double(), reference.grad, **tol)


def test_device_kernel_runs_natively():
    x, bias = inputs((3, 4), "foo")
    op(x, bias)
    assert not any(name.startswith("torch_foo::") for name in torch_foo.fallback_ops())


def test_gradients_match_gelu_of_sum():
    x_cpu, b_cpu = inputs((5, 6), "cpu", requires_grad=True)
    x, b = (t.detach().to("foo").requires_grad_() for t in (x_cpu, b_cpu))
    grad = torch.randn(5, 6)
    F.gelu(x_cpu + b_cpu).backward(grad)
    op(x, b).backward(grad.to("foo"))
    assert_close(x.grad.cpu(), x_cpu.grad)
    assert_close(b.grad.cpu(), b_cpu.grad)


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck(device):
    x, bias = inputs((3, 4), device, torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(op, (x, bias))


def test_only_bias_requires_grad():
    x, bias = inputs((2, 3), "foo")
    bias.requires_grad_()
    op(x, bias).sum().backward()
    assert x.grad is None and bias.grad.shape == (3,)


def test_fake_tracing_records_the_operator():
    x, bias = inputs((2, 4), "foo")
    traced = torch.fx.experimental.proxy_tensor.make_fx(op, tracing_mode="fake")(x, bias)
    assert "torch_foo.bias_gelu" in str(traced.graph)
    assert_close(traced(x, bias).cpu(), op(x, bias).cpu())


@pytest.mark.parametrize(
    "bad",
    [
        lambda d: (torch.randn(3, 4, device=d), torch.randn(5, device=d)),
        lambda d: (torch.randn(3, 4, device=d), torch.randn(1, 4, device=d)),
        lambda d: (torch.randn(3, 4, device=d), torch.randn(4, device=d, dtype=torch.float64)),
        lambda d: (torch.ones(3, 4, device=d, dtype=torch.int64), torch.ones(4, device=d, dtype=torch.int64)),
        lambda d: (torch.randn(3, 4, device=d), torch.randn(4)),
        lambda d: (torch.tensor(1.0, device=d), torch.randn(1, device=d)),
    ],
)
def test_bad_inputs_raise_clear_errors(bad):
    x, bias = bad("foo")
    with pytest.raises(RuntimeError, match="bias_gelu"):
        op(x, bias)
    with torch._subclasses.FakeTensorMode() as mode:  # the fake kernel agrees
        fake = (mode.from_tensor(x), mode.from_tensor(bias))
        with pytest.raises(RuntimeError, match="bias_gelu"):
            op(*fake)


def binutils(tool, *args):
    path = shutil.which(tool)
    assert path, f"{tool} (binutils, which the build's linker comes with) is needed to read the library's symbols"
    return subprocess.run([path, *args], capture_output=True, text=True, check=True).stdout


def sanitizer_runtime_names(library):
    """The names defined by the sanitizer runtimes `library` links (a SANITIZE build: libasan,
    libubsan, libtsan), none in a plain build. A sanitizer runtime defines, unversioned, the C and
    C++ runtime functions it intercepts or replaces (memcpy, operator new, __cxa_throw, ...), and the
    linker binds the library's imports of those names to it instead of to the versioned ones of glibc
    and libstdc++. Read from the runtimes loaded in this process, the ones those imports resolve to."""
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]", binutils("readelf", "-d", str(library)))
    runtimes = {name for name in needed if re.fullmatch(r"lib(asan|ubsan|tsan)\.so[.\d]*", name)}
    mapped = (line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "/" in line)
    loaded = {path for path in mapped if any(Path(path).name.startswith(name) for name in runtimes)}
    assert {name for name in runtimes if not any(Path(path).name.startswith(name) for path in loaded)} == set()
    names = set()
    for path in loaded:
        listing = binutils("nm", "-D", "--defined-only", path)
        names |= {line.split()[-1].split("@")[0] for line in listing.splitlines() if len(line.split()) == 3}
    return names


def test_library_is_built_on_the_stable_abi_alone():
    # The custom operator library (csrc/custom_ops) loads on every supported torch release because it
    # imports only C names: torch's stable C shim (aoti_torch_*, torch_*), the extension's table
    # (fooCustomOpsGetEntry) and the C and C++ runtime (versioned names: GLIBC_, GLIBCXX_, CXXABI_,
    # GCC_); in a SANITIZE build, also names of the sanitizer runtimes (sanitizer_runtime_names). A C++
    # name of torch (at::, c10::, torch:: mangled, unversioned) would tie it to one release.
    listing = binutils("nm", "-D", "--undefined-only", str(ops.LIBRARY))
    imported = [line.split()[-1] for line in listing.splitlines() if line.split()[:1] == ["U"]]
    unversioned = {name for name in imported if "@" not in name}
    allowed = re.compile(r"(aoti_torch|torch)_\w+|fooCustomOpsGetEntry")
    sanitizers = sanitizer_runtime_names(ops.LIBRARY)
    assert not {name for name in unversioned if not allowed.fullmatch(name) and name not in sanitizers}
    assert {"fooCustomOpsGetEntry", "torch_call_dispatcher", "aoti_torch_library_init_def"} <= unversioned
    assert os.path.realpath(ops.LIBRARY) in torch.ops.loaded_libraries

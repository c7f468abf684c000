"""Inductor's kernel code generation for foo devices: the C++ CPU scheduling, with a device entry point.

Inductor asks the scheduling registered for a device to turn each group of fused operations into
a kernel. The emulated device runs host code, so this reuses Inductor's C++ scheduling (loops,
vectorisation, OpenMP, reductions) unchanged and changes only how each kernel is packaged: its
source gets an ``extern "C"`` entry point of the emulated kernel type (a launch context and a
parameter block), named after the kernel so that the runtime's messages name it. The entry unpacks
the block and translates every device pointer through the context's address function, so the
kernel reaches device memory the way every other kernel does (strict memory mode holds). The
wrapper (wrapper.py) compiles and launches it.

Inductor's C++ scheduling itself names, deduplicates and defines each kernel; it hands the wrapper a
definition for its own CPU binding, which the device's wrapper turns into a device kernel's
(``device_kernel_definition``): nothing of Inductor's is copied here.

A device with its own code generator replaces this file: a Triton backend for the chip registers
Inductor's ``TritonScheduling`` (and a Triton wrapper) instead, another compiler registers its own
``BaseScheduling`` subclass. docs/integration/compile.md in the template repository says which
files change.
"""

import ast
import re
import string
from collections.abc import Sequence
from typing import Any

import torch

from .. import _C, _compat

CppScheduling = _compat.resolve("inductor.CppScheduling")
V = _compat.resolve("inductor.V")

# What generated kernels declare, as they are compiled without the project's headers: the launch
# context the runtime passes (fooEmuKernelContext in csrc/runtime/emulation.h, whose layout
# tests/test_compile.py checks this against by compiling both) and the parameter slot the extension
# packs, whose declaration the extension hands over from csrc/compile/CompiledKernels.h (stated there
# once).
KERNEL_ABI = """
struct fooDim3 { unsigned int x, y, z; };
struct fooEmuKernelContext {
  fooDim3 gridDim, blockDim, blockIdx;
  void* sharedMem;
  void* (*address)(const void* devicePtr);
  void (*fail)(const char* message);
};
""" + _C._compiled_kernel_abi()


def _unpack(index: int, arg_type: str) -> str:
    """The C++ expression that reads kernel argument `index` of type `arg_type` from the block."""
    slot = f"params[{index}]"
    if arg_type.endswith("*"):
        return f"static_cast<{arg_type}>(ctx->address({slot}.pointer))"
    if arg_type in ("const int64_t", "int64_t"):
        return f"{slot}.integer"
    if arg_type in ("const float", "float"):
        return f"static_cast<float>({slot}.real)"
    raise NotImplementedError(f"foo compiled kernels: no parameter slot for an argument of type {arg_type!r}")


# Written after each kernel's source: the entry point the runtime launches.
_ENTRY = string.Template(
    """
extern "C" __attribute__((visibility("default"))) void ${entry}(
    const fooEmuKernelContext* ctx, const void* block) {
  [[maybe_unused]] const auto* params = static_cast<const fooKernelParam*>(block);
  try {
    ${kernel}(
      ${args});
  } catch (const std::exception& e) {
    ctx->fail(e.what());
  } catch (...) {
    ctx->fail("unknown C++ exception");
  }
}
"""
)


def kernel_entry(entry: str, kernel: str, arg_types: Sequence[str]) -> str:
    """The entry point `entry` for `kernel` (a function taking `arg_types`): unpacks the parameter block,
    calls the kernel, and reports a C++ exception (an integer division by zero, ...) as a failed launch."""
    args = ",\n      ".join(_unpack(i, t) for i, t in enumerate(arg_types))
    return KERNEL_ABI + _ENTRY.substitute(entry=entry, kernel=kernel, args=args)


# What Inductor's C++ scheduling hands a Python wrapper (touchpoint inductor.cpp_kernel_definition):
# `async_compile.cpp_pybinding(<argument types>, r'''<source>''')`.
_CPP_DEFINITION = re.compile(r"\s*async_compile\.cpp_pybinding\((\[[^\]]*\]), r'''(.*)'''\)\s*", re.S)


def device_kernel_definition(kernel_name: str, cpp_definition: str) -> str:
    """The device kernel `kernel_name` defined from the C++ scheduling's definition of its CPU binding:
    the same source and argument types, with the entry point appended, compiled by compile_kernel."""
    match = _CPP_DEFINITION.fullmatch(cpp_definition)
    if match is None:
        raise _compat.TorchCompatError(
            {"inductor.cpp_kernel_definition": f"the C++ scheduling defined {kernel_name} as {cpp_definition[:120]!r}"}
        )
    arg_types = ast.literal_eval(match.group(1))
    source = match.group(2).rstrip() + "\n" + kernel_entry(kernel_name, "kernel", arg_types)
    return f"compile_kernel(async_compile, {kernel_name!r}, {len(arg_types)}, r'''\n{source}''')"


class FooScheduling(CppScheduling):
    """Inductor's C++ scheduling; each kernel is defined as a device kernel (see the module docstring)."""

    def codegen_node(self, node: Any) -> None:
        # Inductor chooses details of kernel code generation (dtype propagation, float16 upcasts, its
        # C++ rules in common code) by the type of the current device, and knows C++ kernels only as
        # the CPU's: generate the kernel's code as the CPU's, since it is host code. Defining and
        # calling the kernel (flush) happens later, with the graph's device current again.
        with V.graph.set_current_device(torch.device("cpu")):
            super().codegen_node(node)

    def define_kernel(self, src_code: str, nodes: Sequence, kernel_args: Any = None) -> str:
        # Inductor's own definition, which the wrapper turns into a device kernel's (wrapper.py).
        wrapper = V.graph.wrapper_code
        if not hasattr(wrapper, "defining_device_kernels"):
            raise RuntimeError(
                f"torch.compile: a {type(wrapper).__name__} wrapper cannot run foo kernels "
                "(the graph's wrapper is not the device's)"
            )
        with wrapper.defining_device_kernels():
            return super().define_kernel(src_code, nodes, kernel_args)

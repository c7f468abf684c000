"""Inductor's kernel code generation for foo devices: the C++ CPU scheduling, with a device entry point.

Inductor asks the scheduling registered for a device to turn each group of fused operations into
a kernel. The emulated device runs host code, so this reuses Inductor's C++ scheduling (loops,
vectorisation, OpenMP, reductions) unchanged and changes only how each kernel is packaged: its
source gets an ``extern "C"`` entry point of the emulated kernel type (a launch context and a
parameter block), named after the kernel so that the runtime's messages name it. The entry unpacks
the block and translates every device pointer through the context's address function, so the
kernel reaches device memory the way every other kernel does (strict memory mode holds). The
wrapper (wrapper.py) compiles and launches it.

A device with its own code generator replaces this file: a Triton backend for the chip registers
Inductor's ``TritonScheduling`` (and a Triton wrapper) instead, another compiler registers its own
``BaseScheduling`` subclass. docs/integration/compile.md in the template repository says which
files change.
"""

import string
from collections.abc import Sequence
from typing import Any

import torch
from torch._inductor import config
from torch._inductor.codegen.common import KernelArgs
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.utils import Placeholder, get_fused_kernel_name
from torch._inductor.virtualized import V

# The launch context and kernel type the runtime launches (fooEmuKernelContext and fooEmuKernel in
# csrc/runtime/emulation.h; tests/test_compile.py checks the layout against that header), and the
# parameter slot the extension packs (KernelParam in csrc/compile/CompiledKernels.h). Kernels are
# compiled without the project's headers, so they declare these themselves.
KERNEL_ABI = """
struct fooDim3 { unsigned int x, y, z; };
struct fooEmuKernelContext {
  fooDim3 gridDim, blockDim, blockIdx;
  void* sharedMem;
  void* (*address)(const void* devicePtr);
  void (*fail)(const char* message);
};
union fooKernelParam { const void* pointer; int64_t integer; double real; };
"""


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


class FooScheduling(CppScheduling):
    """Inductor's C++ scheduling; each kernel is defined as a device kernel (see the module docstring)."""

    def codegen_node(self, node: Any) -> None:
        # Inductor chooses details of kernel code generation (dtype propagation, float16 upcasts, its
        # C++ rules in common code) by the type of the current device, and knows C++ kernels only as
        # the CPU's: generate the kernel's code as the CPU's, since it is host code. Defining and
        # calling the kernel (flush) happens later, with the graph's device current again.
        with V.graph.set_current_device(torch.device("cpu")):
            super().codegen_node(node)

    def define_kernel(self, src_code: str, nodes: Sequence, kernel_args: KernelArgs | None = None) -> str:
        wrapper = V.graph.wrapper_code
        if src_code in wrapper.src_to_kernel:  # an identical kernel earlier in this graph
            return wrapper.src_to_kernel[src_code]
        fused_name = get_fused_kernel_name(nodes, config.cpp.descriptive_names) if config.cpp.descriptive_names else ""
        kernel_name = "_".join(["cpp", fused_name, wrapper.next_kernel_suffix()])
        wrapper.src_to_kernel[src_code] = kernel_name

        args = self.kernel_group.args if kernel_args is None else kernel_args
        _, _, arg_types = args.cpp_argdefs()
        source = (
            src_code.replace(str(Placeholder.KERNEL_NAME), "kernel")
            .replace(str(Placeholder.DESCRIPTIVE_NAME), kernel_name)
            .replace("#pragma CMT", "//")
        )
        source += kernel_entry(kernel_name, "kernel", arg_types)
        wrapper.define_kernel(
            kernel_name,
            f"compile_kernel(async_compile, {kernel_name!r}, {len(arg_types)}, r'''\n{source}''')",
            gpu=False,
        )
        return kernel_name

"""Inductor's wrapper code for foo devices: the Python function that runs a compiled graph.

Inductor writes one Python module per compiled graph. Its ``call`` allocates buffers, calls extern
kernels (matmul, convolution and fallbacks, as ``torch.ops.aten`` calls that dispatch to the
device's own kernels) and calls the kernels the scheduling generated. Inductor's Python wrapper
knows how to call those only for CPU and GPU devices, so this subclass decides the rest:

- kernel calls become ``launch_kernel(kernel, device index, args...)`` (kernels.py), a launch on
  the current stream of the device;
- buffers are allocated on the graph's device index (Inductor writes a bare device type, which
  would mean the current device);
- streams that user code entered inside the compiled region (``with torch.foo.stream(s)``)
  become stream contexts around the kernels that ran in them.

Modes the device cannot serve fail here with an error that names the limitation, instead of a crash
or a silent CPU run: Inductor's cudagraph trees (``mode="reduce-overhead"``, ``"max-autotune"``:
CUDA only in torch, docs/graphs.md; torch.foo.graph captures a compiled function instead) and the C++
wrapper (``cpp_wrapper``, AOTInductor), whose generated C++ would call the device through Inductor's
C shim, which has no entries for a PrivateUse1 device.
"""

import contextlib
from collections.abc import Iterator
from typing import Any

from .. import _compat
from .scheduling import device_kernel_definition

_KERNELS = "kernels"

config = _compat.resolve("inductor.config")
DeviceOpOverrides = _compat.resolve("inductor.DeviceOpOverrides")
PythonWrapperCodegen = _compat.resolve("inductor.PythonWrapperCodegen")
SubgraphPythonWrapperCodegen = _compat.resolve("inductor.SubgraphPythonWrapperCodegen")
DEFAULT_STREAM_IDX = _compat.resolve("inductor.DEFAULT_STREAM_IDX")
get_stream_name = _compat.resolve("inductor.get_stream_name")
V = _compat.resolve("inductor.V")
_EXTERNAL_OBJECT = _compat.touchpoint("inductor.get_external_object_by_index")

_DEVICE_TYPE = "foo"
_MODULE = "torch_foo"


class _DeviceKernelCalls:
    """What the main and the subgraph wrappers of a foo graph add to Inductor's."""

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline(f"from {_MODULE}._inductor.{_KERNELS} import compile_kernel, launch_kernel")

    @contextlib.contextmanager
    def defining_device_kernels(self) -> Iterator[None]:
        """While the device's scheduling defines a kernel: its definition becomes a device kernel's."""
        self.__dict__["_device_kernels"] = self.__dict__.get("_device_kernels", 0) + 1
        try:
            yield
        finally:
            self.__dict__["_device_kernels"] -= 1

    def define_kernel(
        self,
        kernel_name: str,
        kernel_body: str,
        metadata: str | None = None,
        gpu: bool = True,
        cpp_definition: str | None = None,
    ) -> None:
        if self.__dict__.get("_device_kernels"):
            kernel_body = device_kernel_definition(kernel_name, kernel_body)
        super().define_kernel(kernel_name, kernel_body, metadata, gpu, cpp_definition)

    def _generate_kernel_call_helper(
        self, kernel_name: str, call_args: list[str], *, device=None, triton=True, **kwargs: Any
    ):
        device = device or V.graph.get_current_device_or_throw()
        if triton or device.type != _DEVICE_TYPE:
            return super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)
        index = device.index if device.index is not None else 0
        self.writeline(f"launch_kernel({', '.join([kernel_name, str(index), *call_args])})")

    def codegen_cuda_stream_enter(self, stream_idx: int) -> Any:
        # Inductor defines the stream variables its `with <stream>:` lines use only inside the device
        # guards it writes for GPUs: define each one here, before its first use.
        name = get_stream_name(stream_idx)
        defined = self.__dict__.setdefault("_defined_streams", set())
        if name not in defined:
            defined.add(name)
            if stream_idx == DEFAULT_STREAM_IDX:  # the current stream when the graph runs
                device = V.graph.get_current_device_or_throw()
                self.writeline(f"{name} = torch.{_DEVICE_TYPE}.current_stream({device.index or 0})")
            else:  # a stream the compiled code created or received
                self.add_import_once(f"from {_EXTERNAL_OBJECT.module} import {_EXTERNAL_OBJECT.attribute}")
                user_object = V.graph.scheduler.stream_idx_to_user_obj_idx[stream_idx]
                self.writeline(f"{name} = {_EXTERNAL_OBJECT.attribute}({user_object})")
        return super().codegen_cuda_stream_enter(stream_idx)

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False) -> str:
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if device.type == _DEVICE_TYPE and device.index is not None:
            # Inductor names only the type; no device guard makes it the graph's device.
            line = line.replace(f"device='{_DEVICE_TYPE}'", f"device='{_DEVICE_TYPE}:{device.index}'", 1)
        return line


class FooWrapperCodegen(_DeviceKernelCalls, PythonWrapperCodegen):
    """The Python wrapper of a graph on foo devices."""

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: Any, partition_signatures: Any = None):
        if config.triton.cudagraphs:
            raise RuntimeError(
                f"torch.compile: mode='reduce-overhead' and mode='max-autotune' record graphs with Inductor's "
                f"cudagraph trees, which work on CUDA devices only, not on {_DEVICE_TYPE} (docs/graphs.md). Use "
                f"mode='default' or mode='max-autotune-no-cudagraphs', and capture the compiled function with "
                f"torch.{_DEVICE_TYPE}.graph() yourself."
            )
        if is_subgraph:
            return FooSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return FooWrapperCodegen()


class FooSubgraphWrapperCodegen(_DeviceKernelCalls, SubgraphPythonWrapperCodegen):
    """The wrapper of a subgraph (torch.cond branches, loop bodies, ...) on foo devices."""


class UnsupportedFooWrapper:
    """Registered for the wrapper kinds the device does not have: creating one raises."""

    def __init__(self, kind: str, why: str):
        self.kind = kind
        self.why = why
        self.supports_caching = True

    def create(self, *args: Any, **kwargs: Any):
        raise RuntimeError(f"torch.compile: {self.kind} is not supported on {_DEVICE_TYPE} devices: {self.why}")


CPP_WRAPPER = UnsupportedFooWrapper(
    "the C++ wrapper (cpp_wrapper=True, AOTInductor)",
    "its generated C++ calls devices through Inductor's C shim, which has no entry points for a "
    "PrivateUse1 device. Compile with the default Python wrapper.",
)
FX_WRAPPER = UnsupportedFooWrapper(
    "the FX wrapper (fx_wrapper=True)",
    "it calls Triton kernels, and this device's kernels are C++.",
)


class FooDeviceOpOverrides(DeviceOpOverrides):
    """The device calls Inductor writes into Python wrappers (device guards and streams around
    kernels, synchronisation). The C++ ones belong to the C++ wrapper, which the device does not have."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from {_MODULE}._C import _current_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.{_DEVICE_TYPE}.set_device({device_idx})"

    def synchronize(self) -> str:
        return f"torch.{_DEVICE_TYPE}.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.{_DEVICE_TYPE}.device({device_idx})"

    def current_stream(self) -> str:
        return f"torch.{_DEVICE_TYPE}.current_stream()"

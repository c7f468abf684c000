"""TorchInductor for foo devices: the code generation torch.compile uses for graphs on the device.

Inductor looks up three things by device type, all registered by ``register()``:
- a scheduling, which generates kernels (scheduling.py: Inductor's C++ scheduling, each kernel with
  a device entry point);
- wrapper code generators, which write the Python that allocates buffers and launches kernels
  (wrapper.py; the C++ and FX wrappers raise a clear error);
- device op overrides, the device calls written into wrappers (wrapper.py).

At run time, generated code compiles and launches its kernels through kernels.py. ``register()``
runs before Inductor first compiles for the device (compiler.py): from torch 2.15 on, Inductor calls
it through the device module's ``_inductor_backend_init()``; under 2.14, right after Inductor's entry
point loads. (Inductor's other lookup, through Scheduling and wrapper attributes of the device
module, needs all of them, registers no op overrides, and leaves the scheduler replacement below
undone.)
"""

import importlib

from .. import _compat

_DEVICE_TYPE = "foo"
# The driver's scheduling (module, class) and whether its kernels are Inductor's C++ kernels.
_SCHEDULING = (".scheduling", "FooScheduling")
_CPP_KERNELS = True


def register() -> None:
    register_backend_for_device = _compat.resolve("inductor.register_backend_for_device")
    register_device_op_overrides = _compat.resolve("inductor.register_device_op_overrides")

    scheduling = getattr(importlib.import_module(_SCHEDULING[0], __name__), _SCHEDULING[1])
    from .wrapper import CPP_WRAPPER, FX_WRAPPER, FooDeviceOpOverrides, FooWrapperCodegen

    register_backend_for_device(
        _DEVICE_TYPE,
        scheduling,
        FooWrapperCodegen,
        device_cpp_wrapper_codegen=CPP_WRAPPER,
        device_fx_wrapper_codegen=FX_WRAPPER,
    )
    register_device_op_overrides(_DEVICE_TYPE, FooDeviceOpOverrides())
    if not _CPP_KERNELS:
        return
    # Inductor's scheduler skips loop reordering, reindexing and index inversion for C++ kernels, whose
    # loop groups have another shape than Triton's, by asking ``node.is_cpu()``. The device's kernels
    # come from the C++ scheduling too, so its nodes answer yes there (every other node gets torch's
    # answer); without this, fusing a reduction with a pointwise node fails inside the scheduler. Torch
    # has no per-device query for it: touchpoint inductor.BaseSchedulerNode.is_cpu in _compat.py.
    _compat.schedule_device_nodes_as_cpp(_DEVICE_TYPE)

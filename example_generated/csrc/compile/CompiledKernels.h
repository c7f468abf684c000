// Compiled kernels: how code generated at run time (torch.compile's Inductor kernels) reaches the device.
//
// torch_foo/_inductor compiles each fused kernel into a code object (on the emulated device, a shared
// library whose entry point has the kernel type of csrc/runtime/emulation.h) whose parameter block
// holds one 8-byte KernelParam per kernel argument. This file loads it through the runtime's module
// API once (fooModuleLoad, fooModuleGetFunction) and launches it on every call with
// fooLaunchKernel: on the current stream of the tensors' device, after the work queued before it,
// asynchronously to the host, exactly as the eager kernels run. It uses runtime.h only, so it stays
// as it is on hardware, where the driver loads the code objects a device's code generator writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../runtime/runtime.h"

#include <c10/core/Device.h>

#include "../compat/TorchCompat.h"

// One slot of a kernel's parameter block: a device pointer (as PyTorch stores it in the tensor), an
// integer (sizes, strides) or a floating-point scalar, by the kernel's signature. Stated once, here:
// the extension uses the union, and generated kernels, which are compiled without the project's
// headers, declare it from the same tokens (kKernelParamDeclaration, which torch_foo._C hands to
// torch_foo/_inductor/scheduling.py as _compiled_kernel_abi()).
#define FOO_KERNEL_PARAM(name) \
  union name { \
    const void* pointer; \
    int64_t integer; \
    double real; \
  }

namespace torch_foo {

FOO_KERNEL_PARAM(KernelParam);
static_assert(sizeof(KernelParam) == 8, "generated kernels read 8-byte parameter slots");

// The declaration generated kernels compile, under the name they use.
inline constexpr char kKernelParamDeclaration[] = FOO_STRINGIZE(FOO_KERNEL_PARAM(fooKernelParam);) "\n";

struct CompiledKernel; // a kernel in a loaded code object

// Loads the code object at `path` (once per path; code objects stay loaded for the life of the process,
// like Inductor's own) and returns its kernel `name`, which takes `param_count` parameters.
// Raises if the file or the kernel cannot be loaded.
const CompiledKernel* load_compiled_kernel(const std::string& path, const std::string& name, size_t param_count);

// The kernel behind a handle that load_compiled_kernel returned; raises for any other value.
const CompiledKernel& compiled_kernel(uintptr_t handle);
size_t param_count(const CompiledKernel& kernel);

// Launches `kernel` on the current stream of `device` with `params` (param_count of them, copied
// before this returns); returns at once. A failure inside the kernel is reported at the next
// synchronisation with the stream, as for every kernel.
void launch_compiled_kernel(const CompiledKernel& kernel, c10::DeviceIndex device, const KernelParam* params);

// Kernels in the device's own language (OpenCL C on the OpenCL driver), built from source with the
// device compiler's `options` through fooModuleLoadData, once per process for each source and
// options (the driver and the device compiler keep their own caches across processes). The kernel
// `name` takes `param_count` typed arguments and runs in work-groups of `work_group` work-items.
// Raises with the build log if the source does not build.
const CompiledKernel* load_compiled_source(
    const std::string& source,
    const std::string& options,
    const std::string& name,
    size_t param_count,
    uint32_t work_group);

// The ErrorFlags after a source kernel's own arguments: an integer division by zero, an index out of bounds.
inline constexpr size_t kCompiledKernelFlags = 2;

// Launches a kernel load_compiled_source returned on the current stream of `device` with its
// param_count typed arguments and kCompiledKernelFlags ErrorFlags after them (in `args`;
// fooLaunchKernelArgs: Buffer for device addresses, Value for scalars), one work-item
// per index in [0, work_items) rounded up to whole work-groups (the kernel checks its bound); a
// launch of no work-items enqueues nothing.
void launch_compiled_kernel_args(
    const CompiledKernel& kernel, c10::DeviceIndex device, int64_t work_items, const fooKernelArg* args);
size_t work_group(const CompiledKernel& kernel);

} // namespace torch_foo

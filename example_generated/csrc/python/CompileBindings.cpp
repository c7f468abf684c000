// The bindings of torch.compile's kernels (the compile answer): torch_foo/_inductor/kernels.py loads
// and launches them through these functions.
#include <cstdint>
#include <optional>
#include <string>

#include <c10/util/SmallVector.h>

#include "../compile/CompiledKernels.h"
#include "Bindings.h"

namespace torch_foo {
namespace {

// The device a launch of `kernel` with `count` arguments runs on: device index `device`, checked,
// once the count is the kernel's.
c10::Device launch_device(const CompiledKernel& kernel, int64_t device, size_t count) {
  TORCH_CHECK(
      count == param_count(kernel), "compiled kernel: expected ", param_count(kernel), " arguments, got ", count);
  return c10::Device(c10::DeviceType::PrivateUse1, checked(device));
}

// The data pointer of argument `i` when it is a tensor, which must be on `expected`; nullopt for any
// other argument.
std::optional<void*> tensor_data(pybind11::handle arg, size_t i, const c10::Device& expected) {
  pybind11::detail::make_caster<at::Tensor> tensor;
  if (!tensor.load(arg, false)) {
    return std::nullopt;
  }
  const at::Tensor& t = tensor;
  TORCH_CHECK(t.device() == expected, "compiled kernel: argument ", i, " is on ", t.device(), ", not ", expected);
  return t.data_ptr();
}

// torch.compile's kernels (torch_foo/_inductor/kernels.py): launches a loaded kernel on the current
// stream of `device` with the generated code's arguments, packed into its parameter block.
void launch_compiled_kernel_with(uintptr_t handle, int64_t device, const pybind11::args& args) {
  const CompiledKernel& kernel = compiled_kernel(handle);
  const c10::Device expected = launch_device(kernel, device, args.size());
  c10::SmallVector<KernelParam, 16> params(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const pybind11::handle arg = args[i];
    if (const std::optional<void*> data = tensor_data(arg, i, expected)) {
      params[i].pointer = *data;
    } else if (PyLong_Check(arg.ptr())) {
      params[i].integer = arg.cast<int64_t>();
    } else if (PyFloat_Check(arg.ptr())) {
      params[i].real = arg.cast<double>();
    } else {
      TORCH_CHECK(false, "compiled kernel: argument ", i, " is neither a tensor nor a number");
    }
  }
  launch_compiled_kernel(kernel, expected.index(), params.data());
}

// Kernels built from source (torch_foo/_inductor/opencl_kernels.py): launches one on the current stream
// of `device` with `work_items` work-items and typed arguments: a tensor is a Buffer (its data
// pointer, a device address), an int a 64-bit Value (OpenCL C's long), a float a 32-bit Value. Two
// ErrorFlags follow, which a generated kernel raises for an integer division by zero and for an
// index out of bounds (where the CPU's kernels raise); the stream then reports the failure.
constexpr char kDivisionByZero[] = "ZeroDivisionError: integer division or modulo by zero";
constexpr char kIndexOutOfBounds[] = "IndexError: an index is out of bounds";

void launch_compiled_source_with(uintptr_t handle, int64_t device, int64_t work_items, const pybind11::args& args) {
  const CompiledKernel& kernel = compiled_kernel(handle);
  const c10::Device expected = launch_device(kernel, device, args.size());
  const size_t count = args.size();
  c10::SmallVector<fooKernelArg, 16> typed(count + kCompiledKernelFlags, fooKernelArg{});
  c10::SmallVector<int64_t, 16> integers(count);
  c10::SmallVector<float, 16> reals(count);
  for (size_t i = 0; i < count; ++i) {
    const pybind11::handle arg = args[i];
    if (const std::optional<void*> data = tensor_data(arg, i, expected)) {
      typed[i].kind = fooKernelArgBuffer;
      typed[i].pointer = *data;
    } else if (PyLong_Check(arg.ptr())) {
      integers[i] = arg.cast<int64_t>();
      typed[i].kind = fooKernelArgValue;
      typed[i].pointer = &integers[i];
      typed[i].size = sizeof(int64_t);
    } else if (PyFloat_Check(arg.ptr())) {
      reals[i] = arg.cast<float>();
      typed[i].kind = fooKernelArgValue;
      typed[i].pointer = &reals[i];
      typed[i].size = sizeof(float);
    } else {
      TORCH_CHECK(false, "compiled kernel: argument ", i, " is neither a tensor nor a number");
    }
  }
  typed[count].kind = fooKernelArgErrorFlag;
  typed[count].pointer = kDivisionByZero;
  typed[count + 1].kind = fooKernelArgErrorFlag;
  typed[count + 1].pointer = kIndexOutOfBounds;
  launch_compiled_kernel_args(kernel, expected.index(), work_items, typed.data());
}

void bind_compile(pybind11::module_& m) {
  m.def("_load_compiled_kernel", [](const std::string& path, const std::string& name, size_t param_count) {
    return reinterpret_cast<uintptr_t>(load_compiled_kernel(path, name, param_count));
  });
  m.def("_launch_compiled_kernel", &launch_compiled_kernel_with);
  m.def(
      "_load_compiled_source",
      [](const std::string& source,
         const std::string& options,
         const std::string& name,
         size_t param_count,
         uint32_t work_group) {
        return reinterpret_cast<uintptr_t>(load_compiled_source(source, options, name, param_count, work_group));
      });
  m.def("_launch_compiled_source", &launch_compiled_source_with);
  // The parameter slot generated kernels declare (csrc/compile/CompiledKernels.h states it once).
  m.def("_compiled_kernel_abi", [] { return std::string(kKernelParamDeclaration); });
}

FeatureBindings compile_bindings("compile", &bind_compile);

} // namespace
} // namespace torch_foo

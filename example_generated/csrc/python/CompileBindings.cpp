// The bindings of torch.compile's kernels (the compile answer): torch_foo/_inductor/kernels.py loads
// and launches them through these functions.
#include <cstdint>
#include <string>

#include <c10/util/SmallVector.h>

#include "../compile/CompiledKernels.h"
#include "Bindings.h"

namespace torch_foo {
namespace {

// torch.compile's kernels (torch_foo/_inductor/kernels.py): launches a loaded kernel on the current
// stream of `device` with the generated code's arguments, packed into its parameter block.
void launch_compiled_kernel_with(uintptr_t handle, int64_t device, const pybind11::args& args) {
  const CompiledKernel& kernel = compiled_kernel(handle);
  TORCH_CHECK(
      args.size() == param_count(kernel),
      "compiled kernel: expected ",
      param_count(kernel),
      " arguments, got ",
      args.size());
  const c10::Device expected(c10::DeviceType::PrivateUse1, checked(device));
  c10::SmallVector<KernelParam, 16> params(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const pybind11::handle arg = args[i];
    pybind11::detail::make_caster<at::Tensor> tensor;
    if (tensor.load(arg, false)) {
      const at::Tensor& t = tensor;
      TORCH_CHECK(t.device() == expected, "compiled kernel: argument ", i, " is on ", t.device(), ", not ", expected);
      params[i].pointer = t.data_ptr();
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

void bind_compile(pybind11::module_& m) {
  m.def("_load_compiled_kernel", [](const std::string& path, const std::string& name, size_t param_count) {
    return reinterpret_cast<uintptr_t>(load_compiled_kernel(path, name, param_count));
  });
  m.def("_launch_compiled_kernel", &launch_compiled_kernel_with);
  // The parameter slot generated kernels declare (csrc/compile/CompiledKernels.h states it once).
  m.def("_compiled_kernel_abi", [] { return std::string(kKernelParamDeclaration); });
}

FeatureBindings compile_bindings("compile", &bind_compile);

} // namespace
} // namespace torch_foo

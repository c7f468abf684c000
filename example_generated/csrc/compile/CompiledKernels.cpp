#include "CompiledKernels.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <c10/core/DeviceGuard.h>

#include "../core/Device.h"
#include "../core/Exception.h"
#include "../core/Stream.h"

namespace torch_foo {

struct CompiledKernel {
  fooFunction_t function;
  size_t param_count;
};

namespace {

std::mutex registry_mutex;
std::unordered_map<std::string, fooModule_t>& modules() { // by path
  static auto* loaded = new std::unordered_map<std::string, fooModule_t>();
  return *loaded;
}
std::unordered_set<const CompiledKernel*>& kernels() { // every handle given out (never freed)
  static auto* known = new std::unordered_set<const CompiledKernel*>();
  return *known;
}

} // namespace

const CompiledKernel* load_compiled_kernel(const std::string& path, const std::string& name, size_t param_count) {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  auto found = modules().find(path);
  if (found == modules().end()) {
    fooModule_t module = nullptr;
    FOO_CHECK(fooModuleLoad(&module, path.c_str()));
    found = modules().emplace(path, module).first;
  }
  fooFunction_t function = nullptr;
  FOO_CHECK(fooModuleGetFunction(&function, found->second, name.c_str()));
  const auto* kernel = new CompiledKernel{function, param_count};
  kernels().insert(kernel);
  return kernel;
}

const CompiledKernel& compiled_kernel(uintptr_t handle) {
  const auto* kernel = reinterpret_cast<const CompiledKernel*>(handle);
  const std::lock_guard<std::mutex> lock(registry_mutex);
  TORCH_CHECK(kernels().count(kernel) != 0, "foo: ", handle, " is not a loaded compiled kernel");
  return *kernel;
}

size_t param_count(const CompiledKernel& kernel) {
  return kernel.param_count;
}

void launch_compiled_kernel(const CompiledKernel& kernel, c10::DeviceIndex device, const KernelParam* params) {
  check_device_index(device);
  // The runtime launches on a stream of the current device (a default stream is NULL).
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  const fooDim3 one{1, 1, 1}; // a C++ kernel spreads its loops over host threads itself (OpenMP)
  FOO_CHECK(fooLaunchKernel(
      kernel.function,
      one,
      one,
      params,
      kernel.param_count * sizeof(KernelParam),
      0,
      native_stream(current_stream(device))));
}

} // namespace torch_foo

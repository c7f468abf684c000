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
  uint32_t work_group; // 0: a code object launched with a parameter block, in one block of one thread
};

namespace {

std::mutex registry_mutex;
std::unordered_map<std::string, fooModule_t>& modules() { // by path
  static auto* loaded = new std::unordered_map<std::string, fooModule_t>();
  return *loaded;
}
std::unordered_map<std::string, fooModule_t>& source_modules() { // by options, NUL, source
  static auto* built = new std::unordered_map<std::string, fooModule_t>();
  return *built;
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
  const auto* kernel = new CompiledKernel{function, param_count, 0};
  kernels().insert(kernel);
  return kernel;
}

const CompiledKernel* load_compiled_source(
    const std::string& source,
    const std::string& options,
    const std::string& name,
    size_t param_count,
    uint32_t work_group) {
  TORCH_CHECK(!source.empty(), "foo: compiled kernel ", name, " has no source");
  TORCH_CHECK(work_group > 0, "foo: compiled kernel ", name, " needs a work-group of at least one work-item");
  TORCH_CHECK(
      param_count + kCompiledKernelFlags <= FOO_MAX_KERNEL_ARGS,
      "foo: compiled kernel ",
      name,
      " takes ",
      param_count,
      " arguments, more than a launch passes (FOO_MAX_KERNEL_ARGS = ",
      FOO_MAX_KERNEL_ARGS,
      ")");
  const std::lock_guard<std::mutex> lock(registry_mutex);
  std::string key = options;
  key.push_back('\0');
  key += source;
  auto found = source_modules().find(key);
  if (found == source_modules().end()) {
    fooModule_t module = nullptr;
    FOO_CHECK(fooModuleLoadData(&module, source.data(), source.size(), fooModuleSource, options.c_str()));
    found = source_modules().emplace(std::move(key), module).first;
  }
  fooFunction_t function = nullptr;
  FOO_CHECK(fooModuleGetFunction(&function, found->second, name.c_str()));
  const auto* kernel = new CompiledKernel{function, param_count, work_group};
  kernels().insert(kernel);
  return kernel;
}

size_t work_group(const CompiledKernel& kernel) {
  return kernel.work_group;
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
  TORCH_CHECK(kernel.work_group == 0, "foo: a kernel built from source is launched with typed arguments");
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

void launch_compiled_kernel_args(
    const CompiledKernel& kernel, c10::DeviceIndex device, int64_t work_items, const fooKernelArg* args) {
  TORCH_CHECK(kernel.work_group > 0, "foo: a code object's kernel is launched with a parameter block");
  TORCH_CHECK(work_items >= 0, "foo: a launch of ", work_items, " work-items");
  check_device_index(device);
  if (work_items == 0) {
    return;
  }
  const int64_t groups = (work_items + kernel.work_group - 1) / kernel.work_group;
  TORCH_CHECK(
      groups <= static_cast<int64_t>(UINT32_MAX),
      "foo: a launch of ",
      work_items,
      " work-items exceeds the grid's limit");
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  const fooDim3 grid{static_cast<unsigned int>(groups), 1, 1};
  const fooDim3 block{kernel.work_group, 1, 1};
  FOO_CHECK(fooLaunchKernelArgs(
      kernel.function,
      grid,
      block,
      args,
      static_cast<unsigned int>(kernel.param_count + kCompiledKernelFlags),
      native_stream(current_stream(device))));
}

} // namespace torch_foo

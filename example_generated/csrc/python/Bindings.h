// The module's bindings, in parts: Module.cpp binds what every project has, and each optional
// feature binds its own functions from a file of its own in this directory (<Feature>Bindings.cpp),
// which the project has with the feature. Such a file registers its function with a
// namespace-scope FeatureBindings object; the module calls every registered function when Python
// loads it, so that Module.cpp names no feature.
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

#include "../compat/PythonBindings.h" // pybind11 with torch's type casters
#include "../core/Device.h"

namespace torch_foo {

// A device index from Python, validated before it is narrowed.
inline c10::DeviceIndex checked(int64_t device) {
  check_device_index(device);
  return static_cast<c10::DeviceIndex>(device);
}

// One feature's bindings: constructed at static initialisation (before Python loads the module),
// it adds `bind` to a list that bind_all() walks in the order of construction.
class FeatureBindings {
 public:
  using Bind = void (*)(pybind11::module_& module);
  FeatureBindings(const char* feature, Bind bind);
  FeatureBindings(const FeatureBindings&) = delete;
  FeatureBindings& operator=(const FeatureBindings&) = delete;

  // Calls each registered feature's function with the module (PYBIND11_MODULE, Module.cpp).
  static void bind_all(pybind11::module_& module);

 private:
  const char* feature_;
  Bind bind_;
  FeatureBindings* next_ = nullptr;
};

} // namespace torch_foo

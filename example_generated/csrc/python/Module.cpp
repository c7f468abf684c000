// torch_foo._C: the Python bindings of the backend.
//
// Loading this module registers everything in C++ (kernels, allocator, guard, hooks: static
// initialisers in the other files). The functions below back the device module torch.foo;
// they are private (_-prefixed) and wrapped in Python by torch_foo/*.py. This is the only file
// that includes pybind11, whose headers are slow to compile.
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "../aten/Fallback.h"
#include "../core/Device.h"
#include "../core/Exception.h"
#include "../core/Generator.h"

namespace py = pybind11;

namespace torch_foo {
namespace {

// A device index from Python, validated before it is narrowed.
c10::DeviceIndex checked(int64_t device) {
  check_device_index(device);
  return static_cast<c10::DeviceIndex>(device);
}

py::dict device_properties(c10::DeviceIndex device) {
  fooDeviceProp prop{};
  FOO_CHECK(fooGetDeviceProperties(&prop, device));
  py::dict d;
  d["name"] = std::string(prop.name);
  d["total_memory"] = prop.totalGlobalMem;
  d["multi_processor_count"] = prop.multiProcessorCount;
  d["major"] = prop.major;
  d["minor"] = prop.minor;
  return d;
}

void synchronize(c10::DeviceIndex device) {
  const c10::DeviceIndex previous = exchange_device(device);
  FOO_CHECK(fooDeviceSynchronize());
  exchange_device(previous);
}

bool is_initialized(c10::DeviceIndex device) {
  int initialized = 0;
  return fooDeviceIsInitialized(device, &initialized) == fooSuccess && initialized != 0;
}

} // namespace
} // namespace torch_foo

PYBIND11_MODULE(_C, m) {
  namespace ns = torch_foo;
  ns::route_structured_ops_to_fallback();
  m.doc() = "C++ part of the foo backend (private; use torch.foo)";
  m.def("_device_count", [] { return static_cast<int>(ns::device_count()); });
  m.def("_current_device", [] { return static_cast<int>(ns::current_device()); });
  m.def("_set_device", [](int64_t device) { ns::set_device(ns::checked(device)); });
  m.def("_exchange_device", [](int64_t device) { return static_cast<int>(ns::exchange_device(ns::checked(device))); });
  m.def("_synchronize", [](int64_t device) { ns::synchronize(ns::checked(device)); });
  m.def("_is_initialized", [](int64_t device) { return ns::is_initialized(ns::checked(device)); });
  m.def("_device_properties", [](int64_t device) { return ns::device_properties(ns::checked(device)); });
  m.def("_fallback_ops", &ns::fallback_ops);
  // A new Python object for the device's default generator; torch_foo.random keeps one per device.
  m.def("_default_generator", [](int64_t device) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(ns::default_generator(ns::checked(device))));
  });
}

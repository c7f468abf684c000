// Entry points: the device's monitoring counters (what NVML answers for CUDA), which come with the
// project's profiler answer.
// A hardware port keeps this file; the answers come from driver.h.
#include "driver.h"
#include "internal.h"

using namespace torch_foo;
using namespace torch_foo::runtime;

extern "C" {

fooError_t fooDeviceGetMetric(int device, fooDeviceMetric metric, uint64_t* value) {
  if (value == nullptr) {
    return result(null_argument("value"));
  }
  if (runtime::forked()) {
    return result(forked_child());
  }
  if (!runtime::valid_device(device)) {
    return result(bad_device(device));
  }
  if (metric < fooMetricUtilization || metric > fooMetricClockRate) {
    return result(fail(fooErrorInvalidValue, "unknown device metric %d", static_cast<int>(metric)));
  }
  return result(driver::device_metric(device, metric, value));
}

fooError_t fooDeviceGetProcesses(int device, fooProcessInfo* processes, unsigned int* count) {
  if (count == nullptr) {
    return result(null_argument("count"));
  }
  if (processes == nullptr && *count != 0) {
    return result(null_argument("processes (with a non-zero *count)"));
  }
  if (runtime::forked()) {
    return result(forked_child());
  }
  if (!runtime::valid_device(device)) {
    return result(bad_device(device));
  }
  return result(driver::device_processes(device, processes, count));
}

} // extern "C"

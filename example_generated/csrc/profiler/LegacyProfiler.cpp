// The device times of the legacy profiler: torch.autograd.profiler.profile(use_device="foo")
// without Kineto records a device event on the current stream before and after every operator
// through the ProfilerStubs registered here with registerPrivateUse1Methods, and reads the time
// between them as the operator's device time. (torch.profiler.profile's device timeline is
// KinetoSession.cpp.)
//
// A real device keeps this file: it uses only the events of runtime.h.
#include "../compat/Kineto.h" // ProfilerStubs; first: it configures torch's profiler headers

#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>

#include <functional>
#include <memory>
#include <type_traits>

#include "../core/Device.h"
#include "../core/Exception.h"
#include "../core/Stream.h"

namespace torch_foo {
namespace {

using DeviceEvent = std::remove_pointer_t<fooEvent_t>;

// The legacy profiler's device timing: an event recorded on the current stream at each operator's
// start and end, the elapsed time between them read after the profile. Nothing here may throw
// (PyTorch calls it from RecordFunction callbacks): a failed record leaves an empty event, whose
// elapsed time is 0.
struct LegacyProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(
      c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    int current = 0;
    (void)fooGetDevice(&current);
    if (device != nullptr) {
      *device = static_cast<c10::DeviceIndex>(current);
    }
    fooEvent_t handle = nullptr;
    if (fooEventCreate(&handle) == fooSuccess) {
      *event = std::shared_ptr<DeviceEvent>(handle, [](DeviceEvent* e) { (void)fooEventDestroy(e); });
    }
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
    if (handle != nullptr) {
      try {
        (void)fooEventRecord(handle, current_stream());
      } catch (...) {
      }
    }
  }

  // Microseconds between two recorded events, once the device has reached both.
  float elapsed(
      const torch::profiler::impl::ProfilerVoidEventStub* start,
      const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    if (start == nullptr || end == nullptr || *start == nullptr || *end == nullptr) {
      return 0;
    }
    auto* a = static_cast<fooEvent_t>(start->get());
    auto* b = static_cast<fooEvent_t>(end->get());
    float ms = 0;
    if (fooEventSynchronize(a) != fooSuccess || fooEventSynchronize(b) != fooSuccess ||
        fooEventElapsedTime(&ms, a, b) != fooSuccess) {
      return 0;
    }
    return ms * 1000.0f;
  }

  // Markers and ranges for a device's own tools (CUDA sends them to NVTX); the emulated device has none.
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, i));
      op(i);
    }
  }

  void synchronize() const override {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      int initialized = 0;
      if (fooDeviceIsInitialized(i, &initialized) == fooSuccess && initialized != 0) {
        const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, i));
        FOO_CHECK(fooDeviceSynchronize());
      }
    }
  }

  bool enabled() const override {
    return true;
  }
};

const bool profiler_stubs_registered = [] {
  static LegacyProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

} // namespace
} // namespace torch_foo

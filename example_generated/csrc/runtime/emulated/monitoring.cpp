// Monitoring of the emulated foo device (it comes with the project's profiler answer).
//
// Utilisation is measured: the stream workers report when they start and finish a task
// (streams.cpp, through activity_hook, which this file sets as the program starts), and each
// device keeps, per kind of work, the time during which at least one of its streams ran such a
// task: kernels for the utilisation, copies and fills for the memory utilisation (a kernel's own
// memory traffic is not told apart from its computing). The emulated device has no temperature or
// power sensor and no clock of its own: those metrics are unsupported, as on a device whose driver
// exposes no sensors.
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "../internal.h"
#include "emulated.h"

namespace torch_foo::emulated {
namespace {

// Busy time of one kind of work on one device, over the window since the last read.
struct Busy {
  std::mutex mutex; // guards everything below
  int running = 0; // tasks of this kind running now, on any stream of the device
  int64_t since = 0; // when `running` last went from 0 to 1
  int64_t busy_ns = 0; // busy time in the window, up to `since` while running
  int64_t window_start = now_ns();
};

Busy* const busy = new Busy[FOO_MAX_DEVICES * 2]; // never destroyed: workers run until exit

Busy& busy_of(int device, Activity activity) {
  return busy[device * 2 + (activity == Activity::Compute ? 0 : 1)];
}

// The busy percentage of the window since the last read, which starts a new window.
uint64_t read_percent(Busy& b) {
  std::lock_guard<std::mutex> lock(b.mutex);
  const int64_t now = now_ns();
  int64_t busy_ns = b.busy_ns;
  if (b.running > 0) {
    busy_ns += now - b.since;
    b.since = now;
  }
  const int64_t window = now - b.window_start;
  b.busy_ns = 0;
  b.window_start = now;
  return window <= 0 ? 0 : static_cast<uint64_t>(std::min<int64_t>(100, busy_ns * 100 / window));
}

// A stream worker (or a synchronous copy) of `device` starts or finishes work of that kind.
void record_activity(int device, Activity activity, bool starts) {
  Busy& b = busy_of(device, activity);
  std::lock_guard<std::mutex> lock(b.mutex);
  if (starts) {
    if (b.running++ == 0) {
      b.since = now_ns();
    }
  } else if (--b.running == 0) {
    b.busy_ns += now_ns() - b.since;
  }
}

// Before main(), so before any stream worker starts.
[[maybe_unused]] const bool installed = (activity_hook = &record_activity, true);

} // namespace

} // namespace torch_foo::emulated

namespace torch_foo::driver {

using namespace emulated;

fooError_t device_metric(int device, fooDeviceMetric metric, uint64_t* value) {
  const bool compute = metric == fooMetricUtilization;
  if (compute || metric == fooMetricMemoryUtilization) {
    *value = read_percent(busy_of(device, compute ? Activity::Compute : Activity::Memory));
    return fooSuccess;
  }
  const char* missing = "clock of its own (its kernels run on host threads)";
  if (metric == fooMetricTemperature) {
    missing = "temperature sensor";
  } else if (metric == fooMetricPowerDraw) {
    missing = "power sensor";
  }
  return runtime::fail(fooErrorNotSupported, "the emulated foo device has no %s", missing);
}

fooError_t device_processes(int device, fooProcessInfo* processes, unsigned int* count) {
  // Emulated devices live in their process: the only process that can hold their memory is this one.
  size_t free = 0;
  size_t total = 0;
  (void)mem_get_info(device, &free, &total);
  const size_t used = total - free;
  const unsigned int capacity = *count;
  *count = used > 0 ? 1 : 0;
  if (used > 0 && capacity > 0) {
    processes[0].pid = static_cast<int>(getpid());
    processes[0].usedMemory = used;
  }
  return fooSuccess;
}

} // namespace torch_foo::driver

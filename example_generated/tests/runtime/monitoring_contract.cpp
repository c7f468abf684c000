// The monitoring part of the runtime's contract (runtime.h's metrics and process list), linked into
// contract_test: what the device module's utilization() and list_gpu_processes() rely on.
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "check.h"
#include "test_kernels.h"

namespace {

fooError_t launch_sleep(unsigned microseconds, fooStream_t stream) {
  const fooDim3 one{1, 1, 1};
  SleepParams p{microseconds};
  return fooLaunchKernel(test_kernels()->sleep, one, one, &p, sizeof(p), 0, stream);
}

// The monitoring metrics and the process list: answers every device can give, or
// fooErrorNotSupported for a sensor it lacks.
void test_monitoring() {
  int count = 0;
  OK(fooGetDeviceCount(&count));
  uint64_t value = 0;
  EXPECT_CODE(fooDeviceGetMetric(0, fooMetricUtilization, nullptr), fooErrorInvalidValue);
  EXPECT_CODE(fooDeviceGetMetric(count, fooMetricUtilization, &value), fooErrorInvalidDevice);
  EXPECT_CODE(fooDeviceGetMetric(0, static_cast<fooDeviceMetric>(99), &value), fooErrorInvalidValue);
  for (const auto metric : {fooMetricTemperature, fooMetricPowerDraw, fooMetricClockRate}) {
    const auto error = fooDeviceGetMetric(0, metric, &value);
    EXPECT(error == fooSuccess || error == fooErrorNotSupported);
  }
  // Utilisation covers the window since the previous read: a kernel that sleeps through most of a
  // window makes it busy, an idle window is not.
  if (fooDeviceGetMetric(0, fooMetricUtilization, &value) == fooSuccess) {
    OK(fooSetDevice(0));
    OK(launch_sleep(200000, nullptr));
    OK(fooDeviceSynchronize());
    OK(fooDeviceGetMetric(0, fooMetricUtilization, &value));
    EXPECT(value >= 50 && value <= 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    OK(fooDeviceGetMetric(0, fooMetricUtilization, &value));
    EXPECT(value <= 50);
  }
  if (fooDeviceGetMetric(0, fooMetricMemoryUtilization, &value) == fooSuccess) {
    EXPECT(value <= 100);
  }

  unsigned int n = 1;
  EXPECT_CODE(fooDeviceGetProcesses(0, nullptr, nullptr), fooErrorInvalidValue);
  EXPECT_CODE(fooDeviceGetProcesses(0, nullptr, &n), fooErrorInvalidValue);
  n = 0;
  EXPECT_CODE(fooDeviceGetProcesses(count, nullptr, &n), fooErrorInvalidDevice);
  void* held = nullptr;
  OK(fooSetDevice(0));
  OK(fooMalloc(&held, size_t{1} << 20));
  OK(fooDeviceGetProcesses(0, nullptr, &n));
  EXPECT(n >= 1); // this process holds memory of device 0
  std::vector<fooProcessInfo> processes(n);
  OK(fooDeviceGetProcesses(0, processes.data(), &n));
  bool found = false;
  for (unsigned int i = 0; i < n && i < processes.size(); ++i) {
    found = found || (processes[i].pid == static_cast<int>(getpid()) && processes[i].usedMemory >= (size_t{1} << 20));
  }
  EXPECT(found);
  OK(fooFree(held));
}

const RegisterCheck registered(&test_monitoring);

} // namespace

// Test kernels of the emulated device: one that keeps a stream busy and one that fails.
#include <chrono>
#include <cstdio>
#include <thread>

#include "device.h"

namespace torch_foo::kernels {
namespace {

struct SleepParams {
  int64_t microseconds;
};

void sleep_kernel(const fooEmuKernelContext*, const void* raw) {
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<const SleepParams*>(raw)->microseconds));
}

struct TrapParams {
  char message[256];
};

void trap_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  ctx->fail(static_cast<const TrapParams*>(raw)->message);
}

} // namespace
} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" {

fooError_t fooOpSleep(int64_t microseconds, fooStream_t stream) {
  if (microseconds < 0) {
    return invalid_argument(__func__);
  }
  const SleepParams params{microseconds};
  return launch(function<&sleep_kernel>("sleep"), 1, &params, sizeof(params), stream);
}

fooError_t fooOpTrap(const char* message, fooStream_t stream) {
  TrapParams params{};
  std::snprintf(params.message, sizeof(params.message), "%s", message != nullptr ? message : "");
  return launch(function<&trap_kernel>("trap"), 1, &params, sizeof(params), stream);
}

} // extern "C"

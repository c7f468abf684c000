// The contract test's kernels (test_kernels.h) for the emulated device: host functions written as
// emulation.h says, registered with fooEmuFunctionCreate. A hardware port replaces this file.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "../../csrc/runtime/emulation.h"
#include "test_kernels.h"

namespace {

void sleep_kernel(const fooEmuKernelContext*, const void* params) {
  const auto* p = static_cast<const SleepParams*>(params);
  std::this_thread::sleep_for(std::chrono::microseconds(p->microseconds));
}

void stamp_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const StampParams*>(params);
  int* counter = static_cast<int*>(ctx->address(p->counter));
  int* slot = static_cast<int*>(ctx->address(p->slot));
  *slot = (*counter)++;
}

void fill_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const FillParams*>(params);
  const size_t blocks = static_cast<size_t>(ctx->gridDim.x) * ctx->gridDim.y * ctx->gridDim.z;
  const size_t block =
      ctx->blockIdx.x + ctx->gridDim.x * (ctx->blockIdx.y + static_cast<size_t>(ctx->gridDim.y) * ctx->blockIdx.z);
  const size_t begin = p->count * block / blocks;
  const size_t end = p->count * (block + 1) / blocks;
  auto* data = static_cast<unsigned char*>(ctx->address(p->data));
  std::memset(data + begin, p->value, end - begin);
}

void trap_kernel(const fooEmuKernelContext* ctx, const void* params) {
  char message[64];
  std::snprintf(message, sizeof(message), "trap %d", static_cast<const TrapParams*>(params)->code);
  ctx->fail(message);
}

TestKernels load() {
  TestKernels k{};
  fooEmuFunctionCreate(&k.sleep, "test_sleep", &sleep_kernel);
  fooEmuFunctionCreate(&k.stamp, "test_stamp", &stamp_kernel);
  fooEmuFunctionCreate(&k.fill, "test_fill", &fill_kernel);
  fooEmuFunctionCreate(&k.trap, "test_trap", &trap_kernel);
  return k;
}

} // namespace

const TestKernels* test_kernels(void) {
  static const TestKernels kernels = load();
  return &kernels;
}

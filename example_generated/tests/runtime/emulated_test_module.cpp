// The contract test's module (test_kernels.h) for the emulated device: CMake builds it into a shared
// library (the binary image), and the test builds it again from this source with
// fooModuleLoadData. It links nothing of the runtime: everything reaches it through ctx.
#include "emulation.h"

// Arguments: Buffer int* data, Value int value, Value unsigned int count.
struct TestAddArgs {
  int* data;
  int value;
  unsigned int count;
};

extern "C" void test_add(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const TestAddArgs*>(params);
  int* data = static_cast<int*>(ctx->address(p->data));
  const unsigned long blocks = static_cast<unsigned long>(ctx->gridDim.x) * ctx->gridDim.y * ctx->gridDim.z;
  const unsigned long block = ctx->blockIdx.x +
      ctx->gridDim.x * (ctx->blockIdx.y + static_cast<unsigned long>(ctx->gridDim.y) * ctx->blockIdx.z);
  const unsigned long begin = p->count * block / blocks;
  const unsigned long end = p->count * (block + 1) / blocks;
  for (unsigned long i = begin; i < end; ++i) {
    data[i] += p->value;
  }
}

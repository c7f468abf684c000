// A module for emulation_test.cpp: what a code generator would compile for the emulated device.
// It links against nothing of the runtime; everything reaches it through the kernel's context.
#include "../../csrc/runtime/emulation.h"

extern "C" void add_one(const fooEmuKernelContext* ctx, const void* params) {
  struct Params {
    int* data;
    long n;
  };
  const auto* p = static_cast<const Params*>(params);
  int* data = static_cast<int*>(ctx->address(p->data));
  const long begin = p->n * ctx->blockIdx.x / ctx->gridDim.x;
  const long end = p->n * (ctx->blockIdx.x + 1) / ctx->gridDim.x;
  for (long i = begin; i < end; ++i) {
    data[i] += 1;
  }
}

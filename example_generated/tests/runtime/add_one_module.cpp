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

// Per-thread state of a kernel: a count of the blocks each thread ran, which a block records. A
// thread_local of a module loaded with dlopen is dynamic TLS, allocated for each thread that runs
// one of its blocks the first time it does.
thread_local long blocks_on_this_thread = 0;

extern "C" void count_blocks(const fooEmuKernelContext* ctx, const void* params) {
  long* counts = static_cast<long*>(ctx->address(*static_cast<long* const*>(params)));
  counts[ctx->blockIdx.x] = ++blocks_on_this_thread;
}

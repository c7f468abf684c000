// What the runtime's contract test needs from a device, as the test sees it: its kernels, each
// with the typed arguments it takes (fooLaunchKernelArgs, in this order), a module in the
// device's kernel language and as the device's compiler produced it, and native work for
// fooLaunchNative. contract_test.cpp needs nothing else from a device and assumes no kernel ABI
// (how each argument kind reaches a kernel is the driver's business), so a driver runs it
// unchanged by providing these as its own device code: emulated_test_kernels.cpp is the emulated
// device's version, a port's <driver>_test_kernels.cpp its own.
#pragma once

#include <stddef.h>

#include "../../csrc/runtime/runtime.h"

// Keeps the device busy for `microseconds` (one block; as torch.cuda._sleep does). Arguments:
// Value unsigned int microseconds, which is also the whole parameter block of a fooLaunchKernel
// of a SleepParams.
typedef struct SleepParams {
  unsigned int microseconds;
} SleepParams;

typedef struct TestKernels {
  // sleep (Value unsigned int microseconds): see SleepParams.
  fooFunction_t sleep;
  // stamp (Buffer int* counter, Buffer int* slot): *slot = (*counter)++ (one block, one thread):
  // the order in which kernels ran on a stream.
  fooFunction_t stamp;
  // fill (Buffer unsigned char* data, Value unsigned char value, Value size_t count):
  // data[i] = value for i < count, spread over the launch's blocks (any grid).
  fooFunction_t fill;
  // trap (Value int code, ErrorFlag): raises its ErrorFlag if code != 0 (in every block of any
  // grid), as a kernel that finds bad input does; the stream then reports fooErrorLaunchFailure.
  fooFunction_t trap;
  // swap (Buffer int* data, Value unsigned int n, Local n ints, Local n ints): one block of n
  // threads (n <= 256). Thread i stores data[i] in the first Local region and i in the second; after
  // a barrier it sets data[i] = first[n - 1 - i] * 1000 + second[n - 1 - i]. So both regions must
  // be the block's own and apart.
  fooFunction_t swap;
} TestKernels;

// Loads the kernels (once).
const TestKernels* test_kernels(void);

// One typed argument.
static inline fooKernelArg test_arg(fooKernelArgKind kind, const void* pointer, size_t size) {
  fooKernelArg arg;
  arg.kind = kind;
  arg.pointer = pointer;
  arg.size = size;
  return arg;
}

// Launches of the kernels above with their arguments, on one block of one thread unless a grid is given.
static inline fooError_t test_launch_stamp(int* counter, int* slot, fooStream_t stream) {
  const fooDim3 one = {1, 1, 1};
  fooKernelArg args[2];
  args[0] = test_arg(fooKernelArgBuffer, counter, 0);
  args[1] = test_arg(fooKernelArgBuffer, slot, 0);
  return fooLaunchKernelArgs(test_kernels()->stamp, one, one, args, 2, stream);
}

static inline fooError_t test_launch_fill(
    fooDim3 grid, fooDim3 block, unsigned char* data, unsigned char byte, size_t n, fooStream_t stream) {
  fooKernelArg args[3];
  args[0] = test_arg(fooKernelArgBuffer, data, 0);
  args[1] = test_arg(fooKernelArgValue, &byte, sizeof(byte));
  args[2] = test_arg(fooKernelArgValue, &n, sizeof(n));
  return fooLaunchKernelArgs(test_kernels()->fill, grid, block, args, 3, stream);
}

static inline fooError_t test_launch_trap(fooDim3 grid, int code, const char* message, fooStream_t stream) {
  const fooDim3 one = {1, 1, 1};
  fooKernelArg args[2];
  args[0] = test_arg(fooKernelArgValue, &code, sizeof(code));
  args[1] = test_arg(fooKernelArgErrorFlag, message, 0);
  return fooLaunchKernelArgs(test_kernels()->trap, grid, one, args, 2, stream);
}

// A module image for fooModuleLoadData: `size` bytes at `data` of `format`, built with `options`.
typedef struct TestModuleImage {
  const void* data;
  size_t size;
  fooModuleFormat format;
  const char* options; // NULL: none
} TestModuleImage;

// The test module: one kernel, "test_add" (Buffer int* data, Value int value, Value unsigned int
// count): data[i] += value for i < count, spread over the launch's blocks (any grid).
// test_module_source() is its source in the device's kernel language, test_module_binary() what
// the device's compiler made of it (both valid until the process exits).
TestModuleImage test_module_source(void);
TestModuleImage test_module_binary(void);
// Source in the device's kernel language that does not build: it uses the undeclared name
// `undeclared_in_test_module`, which the compiler's message names.
TestModuleImage test_module_broken_source(void);

// Native work, as a vendor library would enqueue it (fooLaunchNative): stamp's work,
// *slot = (*counter)++, enqueued on `queue` (the stream's native queue), with `args` a
// TestNativeStamp whose buffers and offsets are fooPointerGetNativeHandle's answers.
typedef struct TestNativeStamp {
  void* counter_buffer;
  size_t counter_offset;
  void* slot_buffer;
  size_t slot_offset;
} TestNativeStamp;
void test_native_stamp(void* queue, const void* args);

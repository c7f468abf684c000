// The kernels the runtime's contract test launches, as the test sees them: a name per kernel and
// the layout of its parameter block. contract_test.cpp needs nothing else from a device, so a
// hardware port runs it unchanged by providing these four kernels as device code (load them from a
// module with fooModuleLoad in test_kernels(), say); emulated_test_kernels.cpp is the emulated
// device's version.
#pragma once

#include <stddef.h>

#include "../../csrc/runtime/runtime.h"

// Keeps the device busy for `microseconds` (one block; as torch.cuda._sleep does).
typedef struct SleepParams {
  unsigned int microseconds;
} SleepParams;

// slot[0] = counter[0]++ (one block, one thread): the order in which kernels ran on a stream.
typedef struct StampParams {
  int* counter; // device memory
  int* slot; // device memory
} StampParams;

// data[i] = value for i < count, spread over the launch's blocks (any grid).
typedef struct FillParams {
  unsigned char* data; // device memory
  unsigned char value;
  size_t count;
} FillParams;

// Fails on the device, as a kernel that traps does; the stream reports fooErrorLaunchFailure.
typedef struct TrapParams {
  int code;
} TrapParams;

typedef struct TestKernels {
  fooFunction_t sleep;
  fooFunction_t stamp;
  fooFunction_t fill;
  fooFunction_t trap;
} TestKernels;

// Loads the kernels (once).
const TestKernels* test_kernels(void);

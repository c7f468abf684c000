// How kernels are written for the emulated foo device. Not part of the driver contract:
// a hardware port deletes this header together with csrc/runtime/emulated/ and csrc/kernels/emulated/.
//
// A real device runs compiled device code; the emulated device runs host functions on the worker
// thread of the stream they were launched on. A kernel is a function with the signature of
// fooEmuKernel. A launch calls it once per block of the grid (blocks of one launch run in parallel
// on the worker's OpenMP team), with the block's coordinates and the launch's parameter block, which
// lives until the last block returns.
//
// The parameter block of a typed launch (fooLaunchKernelArgs) is its arguments laid out in order,
// each at the next offset aligned for it: a Value is its bytes, aligned as a C object of its size
// would be (the largest power of two that divides the size, at most 8); every other kind is an
// 8-byte slot aligned to 8: a Buffer is the device address (a `void*`), an ErrorFlag the message
// (a `const char*`), a Local the `size_t` byte offset of its region in ctx->sharedMem (the regions
// follow each other in the order of the arguments, each aligned to 16). So a struct whose fields are
// the arguments, in order, reads the block, and fooLaunchKernel's block (one Value, then a Local of
// sharedMemBytes) arrives exactly as passed, its shared memory at ctx->sharedMem. A kernel raises its
// ErrorFlag with ctx->fail(message slot): the launch fails with that message.
//
// Device memory. In strict memory mode (FOO_STRICT_MEMORY=1) device pointers are not
// host-addressable; a kernel reaches the memory behind a device pointer at ctx->address(ptr), as
// a device's load and store units would. Any other pointer is returned unchanged. Kernels apply it
// to every device pointer they dereference; host code never does.
//
// Kernels come from two places: the operator library registers the kernels compiled into it with
// fooEmuFunctionCreate, and fooModuleLoad opens a shared library (what a code generator such as
// Inductor builds) in which fooModuleGetFunction looks up a symbol of the fooEmuKernel type.
// fooModuleLoadData loads such a library from memory (fooModuleBinary) or builds it from C++
// source (fooModuleSource) with the host compiler: $CXX (else c++) -shared -fPIC -O2 and the
// options given (which add the include path of this header, for instance), in a temporary directory.
// Such a library needs nothing from the runtime at link time: everything reaches it through ctx.
//
// Native work (fooLaunchNative) runs on the stream's worker as fn(NULL, args); it reaches device
// memory at fooEmuAddress(devicePtr), as a kernel does at ctx->address(devicePtr).
#pragma once

#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

// --8<-- [start:kernel-abi] (the template's docs include this block)
typedef struct fooEmuKernelContext {
  fooDim3 gridDim; // as launched
  fooDim3 blockDim;
  fooDim3 blockIdx; // the block this call runs
  void* sharedMem; // the launch's Local regions: scratch memory for this block (NULL if none was asked for)
  // Where this kernel reads and writes the device memory at `devicePtr`.
  void* (*address)(const void* devicePtr);
  // Marks the launch as failed with `message` (copied): the stream reports fooErrorLaunchFailure
  // at its next synchronisation, with the message in fooGetLastErrorMessage(). Raising an
  // ErrorFlag argument is fail(its slot). The kernel should return after calling it; its other
  // blocks may still run (the first message is the launch's).
  void (*fail)(const char* message);
} fooEmuKernelContext;

typedef void (*fooEmuKernel)(const fooEmuKernelContext* ctx, const void* params);
// --8<-- [end:kernel-abi]

// A kernel handle for a function compiled into this program. `name` (copied) appears in errors and
// traces. Handles live until the process exits; create each kernel's handle once.
FOO_API fooError_t fooEmuFunctionCreate(fooFunction_t* f, const char* name, fooEmuKernel kernel);

// Where native work (fooLaunchNative, running on a stream's worker) reads and writes the device
// memory at `devicePtr`: what ctx->address() gives a kernel. Any other pointer is returned unchanged.
FOO_API void* fooEmuAddress(const void* devicePtr);

#ifdef __cplusplus
} // extern "C"
#endif

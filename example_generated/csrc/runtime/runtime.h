// The foo device runtime: the driver API that everything above it is written against.
//
// This is the seam between PyTorch integration and hardware. The implementation in runtime.cpp
// emulates devices in host memory; a hardware team replaces runtime.cpp with calls into its own
// driver (or maps these names onto it) and keeps every file in csrc/core, csrc/aten and the Python
// package unchanged. The API is C, has no PyTorch includes, and follows the conventions of CUDA's
// runtime API so that its semantics are familiar:
//
//  - every call returns a fooError_t; fooGetErrorString() describes it;
//  - the current device is per host thread (fooSetDevice / fooGetDevice)
//    and starts at 0;
//  - device pointers are unified: a pointer identifies its device (fooPointerGetAttributes);
//  - work is ordered per stream. A NULL stream is the default stream of the current device.
//    Functions with the Async suffix only enqueue; the others return when the work is done.
//  - the runtime initialises itself lazily on the first call that touches a device;
//    fooGetDeviceCount never initialises anything.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fooError {
  fooSuccess = 0,
  fooErrorInvalidValue = 1, // a null pointer, bad size or bad enum value
  fooErrorInvalidDevice = 2, // device index outside [0, device count)
  fooErrorMemoryAllocation = 3, // the device is out of memory
  fooErrorInvalidDevicePointer = 4, // not (inside) a live device allocation
  fooErrorInvalidResourceHandle = 5, // unknown stream or event
  fooErrorNotReady = 6, // queried work has not finished yet
  fooErrorNoDevice = 7, // the runtime exposes no devices
} fooError_t;

typedef enum fooMemcpyKind {
  fooMemcpyHostToHost = 0,
  fooMemcpyHostToDevice = 1,
  fooMemcpyDeviceToHost = 2,
  fooMemcpyDeviceToDevice = 3, // also between two devices
} fooMemcpyKind;

// An opaque stream handle. NULL is the default stream of the current device.
typedef struct fooStream_st* fooStream_t;

// A kernel: a function the device runs with one argument block. The emulated device runs it on
// the host with device memory accessible; a real device runs compiled device code instead.
typedef void (*fooKernel_t)(void* args);

typedef struct fooPointerAttributes {
  int device; // owning device, or -1 for host memory
  void* base; // start of the allocation that contains the pointer (NULL for host memory)
  size_t size; // size of that allocation in bytes (0 for host memory)
} fooPointerAttributes;

typedef struct fooDeviceProp {
  char name[64];
  size_t totalGlobalMem; // capacity in bytes
  int multiProcessorCount; // compute units
  int major; // capability, reported through torch.accelerator.get_device_capability
  int minor;
} fooDeviceProp;

const char* fooGetErrorString(fooError_t error);

// Devices. The emulated runtime exposes 2 devices unless the environment variable
// FOO_DEVICE_COUNT says otherwise (0 to 16), and FOO_DEVICE_MEMORY bytes of memory per
// device (suffixes K, M, G allowed; default 8G). Both are read once, when first needed.
fooError_t fooGetDeviceCount(int* count);
fooError_t fooGetDevice(int* device);
fooError_t fooSetDevice(int device);
fooError_t fooGetDeviceProperties(fooDeviceProp* prop, int device);
// Whether `device` has been initialised (used memory or ran work) in this process.
fooError_t fooDeviceIsInitialized(int device, int* initialized);
// Wait for all work on all streams of the current device.
fooError_t fooDeviceSynchronize(void);

// Memory. Allocations belong to the current device. Freeing waits for the device's pending work.
fooError_t fooMalloc(void** devPtr, size_t size);
fooError_t fooFree(void* devPtr);
fooError_t fooMemGetInfo(size_t* free, size_t* total);
fooError_t fooPointerGetAttributes(fooPointerAttributes* attributes, const void* ptr);

// Copies. Device ranges must lie inside one live allocation, host ranges must not be device memory.
// fooMemcpy copies on the calling thread and returns when done; it is not ordered with any
// stream (synchronise the stream first if queued work may still use the memory). Several host
// threads may call it at once on disjoint ranges, which is how large transfers use all cores.
fooError_t fooMemcpy(void* dst, const void* src, size_t count, fooMemcpyKind kind);
fooError_t fooMemcpyAsync(void* dst, const void* src, size_t n, fooMemcpyKind kind, fooStream_t stream);
fooError_t fooMemsetAsync(void* devPtr, int value, size_t count, fooStream_t stream);

// Execution.
fooError_t fooLaunchKernel(fooKernel_t kernel, void* args, fooStream_t stream);
fooError_t fooStreamSynchronize(fooStream_t stream);

#ifdef __cplusplus
} // extern "C"
#endif

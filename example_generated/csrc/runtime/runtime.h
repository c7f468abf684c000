// The foo device runtime: the driver API that everything above it is written against.
//
// This is the seam between PyTorch integration and hardware. The implementation in runtime.cpp
// emulates devices on the host; a hardware team replaces runtime.cpp with calls into its own
// driver (or maps these names onto it) and keeps every file in csrc/core, csrc/aten and the Python
// package unchanged. The API is C, has no PyTorch includes, and follows the conventions of CUDA's
// runtime API so that its semantics are familiar:
//
//  - every call returns a fooError_t; fooGetErrorString() describes it;
//  - the current device is per host thread (fooSetDevice / fooGetDevice) and starts at 0;
//  - device pointers are unified: a pointer identifies its device (fooPointerGetAttributes);
//  - work runs asynchronously on streams, in order within a stream. A NULL stream is the default
//    stream of the current device (an ordinary stream: it does not synchronise with the others).
//    Functions with the Async suffix, kernel launches and event records only enqueue work;
//  - events mark a point in a stream: query it, wait for it on the host or on another stream,
//    and time the work between two of them;
//  - a kernel that fails marks its stream; the next call that synchronises with that stream
//    reports fooErrorLaunchFailure (once), as a device reports a fault at the next synchronisation;
//  - the runtime initialises itself lazily on the first call that touches a device (memory,
//    streams, events, kernels). fooGetDeviceCount, fooGetDeviceProperties, fooSetDevice and
//    fooGetDevice never initialise anything. A process forked after initialisation cannot use the
//    runtime: its calls return fooErrorForkedAfterInit at once (fooIsInBadFork tells).
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
  fooErrorMemoryAllocation = 3, // the device (or the host, for pinned memory) is out of memory
  fooErrorInvalidDevicePointer = 4, // not (inside) a live device allocation
  fooErrorInvalidResourceHandle = 5, // unknown stream or event, or an event that cannot be used so
  fooErrorNotReady = 6, // queried work has not finished yet
  fooErrorNoDevice = 7, // the runtime exposes no devices
  fooErrorLaunchFailure = 8, // a kernel on the stream failed (its message went to stderr)
  fooErrorNotPermitted = 9, // waiting on a stream from a kernel running on that same stream
  fooErrorForkedAfterInit = 10, // this process was forked after the runtime was initialised
} fooError_t;

typedef enum fooMemcpyKind {
  fooMemcpyHostToHost = 0,
  fooMemcpyHostToDevice = 1,
  fooMemcpyDeviceToHost = 2,
  fooMemcpyDeviceToDevice = 3, // also between two devices
} fooMemcpyKind;

typedef enum fooMemoryType {
  fooMemoryTypeUnregistered = 0, // ordinary (pageable) host memory, or not memory of this runtime
  fooMemoryTypeHost = 1, // pinned host memory from fooMallocHost
  fooMemoryTypeDevice = 2,
} fooMemoryType;

// Opaque handles. A NULL stream is the default stream of the current device.
typedef struct fooStream_st* fooStream_t;
typedef struct fooEvent_st* fooEvent_t;

// A kernel: a function the device runs with one argument block. It returns 0 on success; any
// other value marks its stream as failed. The emulated device runs it on the stream's worker
// thread; a real device runs compiled device code instead.
typedef int (*fooKernel_t)(void* args);

typedef struct fooPointerAttributes {
  fooMemoryType type;
  int device; // owning device, or -1 for host memory
  void* base; // start of the allocation that contains the pointer (NULL for unregistered memory)
  size_t size; // size of that allocation in bytes (0 for unregistered memory)
} fooPointerAttributes;

typedef struct fooDeviceProp {
  char name[64];
  size_t totalGlobalMem; // capacity in bytes
  int multiProcessorCount; // compute units
  int major; // capability, reported through torch.accelerator.get_device_capability
  int minor;
} fooDeviceProp;

// Stream flags (fooStreamCreateWithPriority). Every stream is non-blocking: none of them
// synchronises implicitly with the default stream.
#define fooStreamDefault 0x0
#define fooStreamNonBlocking 0x1

// Event flags (fooEventCreateWithFlags). Events record timestamps unless created with
// fooEventDisableTiming, which makes recording them cheaper.
#define fooEventDefault 0x0
#define fooEventDisableTiming 0x2

const char* fooGetErrorString(fooError_t error);

// Devices. The emulated runtime exposes 2 devices unless the environment variable
// FOO_DEVICE_COUNT says otherwise (0 to 16), with FOO_DEVICE_MEMORY bytes of memory each
// (suffixes K, M, G allowed; default 8G). FOO_STRICT_MEMORY=1 makes device memory inaccessible
// to host code (see runtime.cpp). All three are read once, when first needed.
fooError_t fooGetDeviceCount(int* count);
fooError_t fooGetDevice(int* device);
fooError_t fooSetDevice(int device);
fooError_t fooGetDeviceProperties(fooDeviceProp* prop, int device);
// Whether `device` has been initialised (used memory or ran work) in this process.
fooError_t fooDeviceIsInitialized(int device, int* initialized);
// Wait for all work on all streams of the current device.
fooError_t fooDeviceSynchronize(void);
// Sets *bad_fork to 1 if this process was forked after the runtime had been initialised (every
// call other than this one, fooGetDeviceCount, fooGetDeviceProperties and fooGetErrorString
// then fails with fooErrorForkedAfterInit), else 0.
fooError_t fooIsInBadFork(int* bad_fork);

// Device memory. Allocations belong to the current device. Freeing waits for all pending work on
// every device, as a driver's free does; allocation never waits.
fooError_t fooMalloc(void** devPtr, size_t size);
fooError_t fooFree(void* devPtr);
fooError_t fooMemGetInfo(size_t* free, size_t* total);
fooError_t fooPointerGetAttributes(fooPointerAttributes* attributes, const void* ptr);

// Pinned (page-locked) host memory: the only host memory that asynchronous copies read or write
// asynchronously. Freeing waits for pending work, as fooFree does.
fooError_t fooMallocHost(void** ptr, size_t size);
fooError_t fooFreeHost(void* ptr);

// Copies. Device ranges must lie inside one live allocation, host ranges must not be device memory.
// fooMemcpy copies on the calling thread and returns when done; it is not ordered with any
// stream (synchronise the stream first if queued work may still use the memory). Several host
// threads may call it at once on disjoint ranges, which is how large transfers use all cores.
// fooMemcpyAsync is ordered on `stream`. With pinned host memory it returns at once and the copy
// runs with the stream; with pageable host memory it returns once the host memory is no longer
// needed (the copy has been done), as a driver staging pageable memory does.
fooError_t fooMemcpy(void* dst, const void* src, size_t count, fooMemcpyKind kind);
fooError_t fooMemcpyAsync(void* dst, const void* src, size_t n, fooMemcpyKind kind, fooStream_t stream);
fooError_t fooMemsetAsync(void* devPtr, int value, size_t count, fooStream_t stream);

// Streams. Each stream runs its work in order, asynchronously to the host. Priorities range from
// `least` (0, the default) to `greatest` (-1); lower numbers mean higher priority.
fooError_t fooStreamCreate(fooStream_t* stream);
fooError_t fooStreamCreateWithPriority(fooStream_t* stream, unsigned int flags, int priority);
// Returns at once; the stream finishes its pending work first. Default streams cannot be destroyed.
fooError_t fooStreamDestroy(fooStream_t stream);
// fooSuccess if all work enqueued so far has finished, fooErrorNotReady if not.
fooError_t fooStreamQuery(fooStream_t stream);
fooError_t fooStreamSynchronize(fooStream_t stream);
// Work enqueued on `stream` after this call waits until `event` has completed (flags must be 0).
fooError_t fooStreamWaitEvent(fooStream_t stream, fooEvent_t event, unsigned int flags);
fooError_t fooStreamGetPriority(fooStream_t stream, int* priority);
fooError_t fooStreamGetDevice(fooStream_t stream, int* device);
fooError_t fooDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);

// Events. An event completes when the work enqueued on its stream before the record has finished.
// An event that was never recorded counts as complete.
fooError_t fooEventCreate(fooEvent_t* event);
fooError_t fooEventCreateWithFlags(fooEvent_t* event, unsigned int flags);
// Records on `stream` (its device must be the event's device, which is the current device when the
// event was created). Recording again moves the event to the new point.
fooError_t fooEventRecord(fooEvent_t event, fooStream_t stream);
fooError_t fooEventQuery(fooEvent_t event);
fooError_t fooEventSynchronize(fooEvent_t event);
// Milliseconds between two completed events that both record timing.
fooError_t fooEventElapsedTime(float* ms, fooEvent_t start, fooEvent_t end);
// Returns at once; a pending record still completes.
fooError_t fooEventDestroy(fooEvent_t event);

// Execution. The kernel runs after the work already enqueued on `stream`; `args` is its argument
// block, owned by the caller (the kernel may free it).
fooError_t fooLaunchKernel(fooKernel_t kernel, void* args, fooStream_t stream);

// Emulation only, for use inside kernels: the address at which a kernel reaches device memory
// `ptr` (any other pointer is returned unchanged). The emulated device runs kernels on the host,
// where device memory has a second, runtime-only address in strict memory mode. On hardware,
// kernels receive device pointers and use them directly, so this is the identity.
void* fooKernelAddress(const void* ptr);

#ifdef __cplusplus
} // extern "C"
#endif

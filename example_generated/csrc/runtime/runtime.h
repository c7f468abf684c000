// The foo device runtime: the driver API that everything above it is written against.
//
// This is the first of the two seams between PyTorch integration and hardware (the second is the
// operator library, csrc/kernels/kernels.h). The API is C, has no PyTorch includes, and follows the
// conventions of CUDA's runtime API so that its semantics are familiar. The files in csrc/runtime/
// implement it in two layers: the entry points (api_*.cpp) keep the rules below (argument checks,
// lazy initialisation, fork state, error reporting) and call the device layer declared in driver.h;
// csrc/runtime/emulated/ implements that layer on the host. A hardware port implements driver.h with
// its vendor driver and keeps the entry points; tests/runtime/contract_test.cpp checks this contract.
//
//  - every call returns a fooError_t; fooGetErrorString() names the code and
//    fooGetLastErrorMessage() gives the details of the last failure on the calling thread;
//  - the current device is per host thread (fooSetDevice / fooGetDevice) and starts at 0;
//  - device pointers are unified: a pointer identifies its device (fooPointerGetAttributes);
//    host code never dereferences them, kernels and copies do, unless the device reports
//    hostAccessesDeviceMemory (fooDeviceProp). They are addresses in a range the driver reserves,
//    which the host may be unable to access at all (the emulated device in strict memory mode; a
//    device whose memory is buffer objects, such as OpenCL's, always). Arithmetic inside an
//    allocation is valid (a caching allocator splits its segments, a tensor's data pointer adds
//    its offset): the driver maps any address inside a live allocation to the buffer and the byte
//    offset behind it (fooPointerGetNativeHandle);
//  - work runs asynchronously on streams, in order within a stream. A NULL stream is the default
//    stream of the current device (an ordinary stream: it does not synchronise with the others).
//    Functions with the Async suffix, kernel and host-function launches and event records only
//    enqueue work;
//  - events mark a point in a stream: query it, wait for it on the host or on another stream,
//    and time the work between two of them;
//  - a kernel that fails marks its stream; the next call that synchronises with that stream
//    reports fooErrorLaunchFailure (once), with the kernel's message in fooGetLastErrorMessage(),
//    as a device reports a fault at the next synchronisation. A kernel reports a failure through
//    an ErrorFlag argument of its launch (fooKernelArgErrorFlag), whose message the launch gives;
//  - work of a vendor library (a BLAS, CLBlast) enters a stream only through fooLaunchNative, so
//    that stream order, graph capture and tracing see it like any other work;
//  - the runtime initialises itself lazily on the first call that touches a device (memory,
//    streams, events, modules, launches). fooGetDeviceCount, fooGetDeviceProperties,
//    fooSetDevice and fooGetDevice never initialise anything, and counting devices never loads
//    the vendor's drivers into the process (a driver that needs them to count asks a child
//    process): a process that only counted devices may fork freely. A process forked after
//    initialisation cannot use the runtime: its calls return fooErrorForkedAfterInit at once
//    (fooIsInBadFork tells);
//  - work that runs on a stream (kernels, host functions) must not call the runtime.
#pragma once

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define FOO_API __declspec(dllexport)
#else
#define FOO_API __attribute__((visibility("default")))
#endif

// The version of this API: major * 1000 + minor * 10, as CUDART_VERSION.
#define FOO_RUNTIME_VERSION 2100

// The most devices the runtime addresses; the device count (fooGetDeviceCount) is at most this.
#define FOO_MAX_DEVICES 16

// The largest kernel parameter block fooLaunchKernel accepts, in bytes (for fooLaunchKernelArgs: the
// Value arguments of one launch together).
#define FOO_MAX_PARAM_BYTES 4096

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fooError {
  fooSuccess = 0,
  fooErrorInvalidValue = 1, // a null pointer, bad size or bad enum value
  fooErrorInvalidDevice = 2, // device index outside [0, device count)
  fooErrorMemoryAllocation = 3, // the device (or the host, for pinned memory) is out of memory
  fooErrorInvalidDevicePointer = 4, // not (inside) a live device allocation
  fooErrorInvalidResourceHandle = 5, // unknown stream, event, module or function, or one that cannot be used so
  fooErrorNotReady = 6, // queried work has not finished yet
  fooErrorNoDevice = 7, // the runtime exposes no devices
  fooErrorLaunchFailure = 8, // a kernel on the stream failed (fooGetLastErrorMessage says how)
  fooErrorNotPermitted = 9, // a call from work running on a stream, which would wait for itself
  fooErrorForkedAfterInit = 10, // this process was forked after the runtime was initialised
  fooErrorNotSupported = 11, // the device or driver does not support this call or argument
  fooErrorNotFound = 12, // a module file or a kernel name that does not exist
  fooErrorStreamCaptureUnsupported = 13, // not permitted while a stream captures (the capture is invalidated)
  fooErrorStreamCaptureInvalidated = 14, // the capture was invalidated by an earlier failed call
  fooErrorStreamCaptureUnjoined = 15, // a stream that joined the capture did not join back to its origin
  fooErrorStreamCaptureIsolation = 16, // a capture would depend on work outside it (an event recorded before)
  // a module that does not build or load (the build log is in fooGetLastErrorMessage)
  fooErrorInvalidKernelImage = 17,
  fooErrorUnknown = 999, // a driver failure with no better code (fooGetLastErrorMessage has its text)
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

// Opaque handles. A NULL stream is the default stream of the current device. A handle names its
// object until the object is destroyed (unloaded, for modules and their kernels); from then on
// every call refuses it with fooErrorInvalidResourceHandle, a second destroy included, even after
// new objects were made. So does a value that was never a handle of that kind.
typedef struct fooStream_st* fooStream_t;
typedef struct fooEvent_st* fooEvent_t;
typedef struct fooModule_st* fooModule_t; // a loaded code object
typedef struct fooFunction_st* fooFunction_t; // a kernel: device code that fooLaunchKernel runs
typedef struct fooGraph_st* fooGraph_t; // work recorded by a stream capture
typedef struct fooGraphExec_st* fooGraphExec_t; // a graph made ready to launch

typedef struct fooPointerAttributes {
  fooMemoryType type;
  int device; // owning device, or -1 for host memory
  void* base; // start of the allocation that contains the pointer (NULL for unregistered memory)
  size_t size; // size of that allocation in bytes (0 for unregistered memory)
} fooPointerAttributes;

typedef struct fooDeviceProp {
  char name[64];
  size_t totalGlobalMem; // capacity in bytes
  int multiProcessorCount; // compute units: blocks that run at the same time
  int maxThreadsPerBlock; // the largest block fooLaunchKernel accepts (x * y * z)
  size_t sharedMemPerBlock; // the most shared memory one block may ask for
  int major; // capability, reported through torch.accelerator.get_device_capability
  int minor;
  // 1 if host code may read and write this device's memory through device pointers, coherently
  // with the device once the work that uses the memory has finished (CUDA reports the like as
  // cudaDevAttrPageableMemoryAccess / cudaDevAttrDirectManagedMemAccessFromHost on coherent
  // systems); 0 if device memory is reachable only through copies and kernels. With 1, collectives
  // may exchange device memory in place instead of staging it through host buffers.
  int hostAccessesDeviceMemory;
} fooDeviceProp;

// A launch geometry: a grid of blocks, or the threads of one block.
typedef struct fooDim3 {
  unsigned int x;
  unsigned int y;
  unsigned int z;
} fooDim3;

// Stream flags (fooStreamCreateWithPriority). Every stream is non-blocking: none of them
// synchronises implicitly with the default stream.
#define fooStreamDefault 0x0
#define fooStreamNonBlocking 0x1

// Event flags (fooEventCreateWithFlags). Events record timestamps unless created with
// fooEventDisableTiming, which makes recording them cheaper. fooEventBlockingSync is accepted
// for CUDA compatibility.
#define fooEventDefault 0x0
#define fooEventBlockingSync 0x1
#define fooEventDisableTiming 0x2

// ---- errors and versions ------------------------------------------------------------------------

FOO_API const char* fooGetErrorString(fooError_t error);
// The details of the last call on this thread that failed (which argument, the driver's own error
// text, a failed kernel's message); "" if none failed yet. Valid until the thread's next failure.
FOO_API const char* fooGetLastErrorMessage(void);
// FOO_RUNTIME_VERSION of the runtime this program runs with, and the driver's own version.
FOO_API fooError_t fooRuntimeGetVersion(int* version);
FOO_API fooError_t fooDriverGetVersion(int* version);

// ---- devices ------------------------------------------------------------------------------------

FOO_API fooError_t fooGetDeviceCount(int* count);
FOO_API fooError_t fooGetDevice(int* device);
FOO_API fooError_t fooSetDevice(int device);
FOO_API fooError_t fooGetDeviceProperties(fooDeviceProp* prop, int device);
// Whether `device` has been initialised (used memory or ran work) in this process.
FOO_API fooError_t fooDeviceIsInitialized(int device, int* initialized);
// Wait for all work on all streams of the current device.
FOO_API fooError_t fooDeviceSynchronize(void);
// Sets *bad_fork to 1 if this process was forked after the runtime had been initialised (every
// call other than this one, fooGetDeviceCount, fooGetDeviceProperties, fooGetErrorString and
// the version queries then fails with fooErrorForkedAfterInit), else 0.
FOO_API fooError_t fooIsInBadFork(int* bad_fork);

// ---- peer access --------------------------------------------------------------------------------

// Sets *canAccessPeer to 1 if kernels and copies running on `device` may address memory of
// `peerDevice` directly (CUDA's cudaDeviceCanAccessPeer), else 0; 0 when the two are the same
// device. Initialises nothing.
FOO_API fooError_t fooDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice);

// ---- monitoring ---------------------------------------------------------------------------------

// What a device reports about itself while it runs (what NVML reports for CUDA devices).
typedef enum fooDeviceMetric {
  // Percent of the time since the previous read of this metric on this device (since the process
  // started, for the first read) during which at least one kernel was running.
  fooMetricUtilization = 0,
  // Percent of the same kind of window during which device memory was being read or written.
  fooMetricMemoryUtilization = 1,
  fooMetricTemperature = 2, // degrees Celsius
  fooMetricPowerDraw = 3, // milliwatts
  fooMetricClockRate = 4, // the compute clock, in MHz
} fooDeviceMetric;

// A process that holds memory of a device.
typedef struct fooProcessInfo {
  int pid;
  size_t usedMemory; // bytes of the device's memory it holds
} fooProcessInfo;

// Reads `metric` of `device` into *value. fooErrorNotSupported if the device has no
// such sensor (the message says which). Never waits for work and initialises nothing.
FOO_API fooError_t fooDeviceGetMetric(int device, fooDeviceMetric metric, uint64_t* value);

// The processes holding memory of `device`: *count is the capacity of `processes` on entry (0
// with processes == NULL to ask for the number only) and the number of such processes on return;
// at most the capacity are written. Initialises nothing.
FOO_API fooError_t fooDeviceGetProcesses(int device, fooProcessInfo* processes, unsigned int* count);

// ---- memory -------------------------------------------------------------------------------------

// Device memory. Allocations belong to the current device. Freeing waits for all pending work on
// every device, as a driver's free does; allocation never waits.
FOO_API fooError_t fooMalloc(void** devPtr, size_t size);
FOO_API fooError_t fooFree(void* devPtr);
FOO_API fooError_t fooMemGetInfo(size_t* free, size_t* total);
FOO_API fooError_t fooPointerGetAttributes(fooPointerAttributes* attributes, const void* ptr);

// Pinned (page-locked) host memory: the only host memory that asynchronous copies read or write
// asynchronously. Freeing waits for pending work, as fooFree does.
FOO_API fooError_t fooMallocHost(void** ptr, size_t size);
FOO_API fooError_t fooFreeHost(void* ptr);

// Copies. Device ranges must lie inside one live allocation, host ranges must not be device memory.
// fooMemcpy copies on the calling thread and returns when done; it is not ordered with any
// stream (synchronise the stream first if queued work may still use the memory). Several host
// threads may call it at once on disjoint ranges, which is how large transfers use all cores.
// fooMemcpyAsync is ordered on `stream`. With pinned host memory it returns at once and the copy
// runs with the stream; with pageable host memory it returns once the host memory is no longer
// needed: to the host, once the copy has been done; from the host, once the bytes have been read,
// which a driver may do by copying them into a staging buffer of its own and moving them to the
// device later in the stream's order (as CUDA's driver does with small copies).
FOO_API fooError_t fooMemcpy(void* dst, const void* src, size_t count, fooMemcpyKind kind);
FOO_API fooError_t fooMemcpyAsync(
    void* dst,
    const void* src,
    size_t count,
    fooMemcpyKind kind,
    fooStream_t stream); // NULL: the default stream of the current device
FOO_API fooError_t fooMemsetAsync(void* devPtr, int value, size_t count, fooStream_t stream);

// ---- streams ------------------------------------------------------------------------------------

// Each stream runs its work in order, asynchronously to the host. Priorities range from `least`
// (0, the default) to `greatest` (-1); lower numbers mean higher priority.
FOO_API fooError_t fooStreamCreate(fooStream_t* stream);
FOO_API fooError_t fooStreamCreateWithPriority(fooStream_t* stream, unsigned int flags, int priority);
// Returns at once; the stream finishes its pending work first. Default streams cannot be destroyed.
FOO_API fooError_t fooStreamDestroy(fooStream_t stream);
// fooSuccess if all work enqueued so far has finished, fooErrorNotReady if not.
FOO_API fooError_t fooStreamQuery(fooStream_t stream);
FOO_API fooError_t fooStreamSynchronize(fooStream_t stream);
// Work enqueued on `stream` after this call waits until `event` has completed (flags must be 0).
FOO_API fooError_t fooStreamWaitEvent(fooStream_t stream, fooEvent_t event, unsigned int flags);
FOO_API fooError_t fooStreamGetPriority(fooStream_t stream, int* priority);
// The device of `stream`. Any value is accepted: one that is not a live stream of this runtime gives
// fooErrorInvalidResourceHandle (how a handle received from other code is checked).
FOO_API fooError_t fooStreamGetDevice(fooStream_t stream, int* device);
FOO_API fooError_t fooDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);

// ---- events -------------------------------------------------------------------------------------

// An event completes when the work enqueued on its stream before the record has finished.
// An event that was never recorded counts as complete.
FOO_API fooError_t fooEventCreate(fooEvent_t* event);
FOO_API fooError_t fooEventCreateWithFlags(fooEvent_t* event, unsigned int flags);
// Records on `stream` (its device must be the event's device, which is the current device when the
// event was created). Recording again moves the event to the new point.
FOO_API fooError_t fooEventRecord(fooEvent_t event, fooStream_t stream);
FOO_API fooError_t fooEventQuery(fooEvent_t event);
FOO_API fooError_t fooEventSynchronize(fooEvent_t event);
// Milliseconds between two completed events that both record timing.
FOO_API fooError_t fooEventElapsedTime(float* ms, fooEvent_t start, fooEvent_t end);
// Returns at once; a pending record still completes.
FOO_API fooError_t fooEventDestroy(fooEvent_t event);

// ---- modules and kernel launch ------------------------------------------------------------------

// A module is a code object the driver loads (a CUDA cubin, an OpenCL program; on the emulated
// device, a shared library whose kernels follow emulation.h). Loading needs no current device;
// unloading waits for all pending work, then invalidates the module's functions. fooModuleLoad
// loads a file: what the device's compiler produced (on OpenCL, a file whose name ends in .cl is
// source, built as fooModuleLoadData builds it); a file that does not exist is fooErrorNotFound.
FOO_API fooError_t fooModuleLoad(fooModule_t* module, const char* path);

typedef enum fooModuleFormat {
  // the device's kernel language: OpenCL C; C++ on the emulated device (built by the host compiler)
  fooModuleSource = 0,
  // what the device's compiler produced: an OpenCL program binary; a shared library on the emulated device
  fooModuleBinary = 1,
} fooModuleFormat;

// Builds or loads a module from `size` bytes at `image`, for every device of the runtime, with the
// device compiler's `options` (NULL: none). A module that does not build is
// fooErrorInvalidKernelImage with the build log in fooGetLastErrorMessage().
// clang-format off: the seam's declarations as docs/porting.md gives them
FOO_API fooError_t fooModuleLoadData(
    fooModule_t* module, const void* image, size_t size, fooModuleFormat format, const char* options);
// clang-format on
FOO_API fooError_t fooModuleGetFunction(fooFunction_t* f, fooModule_t module, const char* name);
FOO_API fooError_t fooModuleUnload(fooModule_t module);
// The kernel's name, for error messages and traces (valid as long as the function is).
FOO_API fooError_t fooFuncGetName(const char** name, fooFunction_t function);

// Runs `function` after the work already enqueued on `stream` and returns at once: the kernel runs
// once per block of `gridDim` (x * y * z blocks, in any order, possibly at the same time), each
// block with `blockDim` threads and `sharedMemBytes` of shared memory. `params` points to the
// kernel's parameter block of `paramsSize` bytes (at most FOO_MAX_PARAM_BYTES), which is copied
// before this returns: the caller may reuse it at once. It is the typed launch
// (fooLaunchKernelArgs) of one Value argument, the parameter block (none when paramsSize is 0),
// followed, when sharedMemBytes > 0, by one Local argument of sharedMemBytes. So a block that
// holds device pointers works only on a device whose kernels take pointers inside a struct (the
// emulated device does, OpenCL does not): portable callers pass Buffer arguments.
FOO_API fooError_t fooLaunchKernel(
    fooFunction_t function,
    fooDim3 gridDim,
    fooDim3 blockDim,
    const void* params,
    size_t paramsSize,
    size_t sharedMemBytes,
    fooStream_t stream);

// The most arguments one launch passes.
#define FOO_MAX_KERNEL_ARGS 64

// One argument of a typed launch (fooLaunchKernelArgs). How each kind reaches the kernel is the
// driver's kernel ABI (docs/porting.md): on OpenCL a Buffer is two parameters (the arena's cl_mem
// and a ulong byte offset), an ErrorFlag two (a __global uint* and a uint token); on the emulated
// device every argument is a slot of the parameter block (emulation.h).
typedef enum fooKernelArgKind {
  fooKernelArgValue = 0, // `size` bytes at `pointer`, copied at launch (no device pointers inside)
  fooKernelArgBuffer = 1, // the device address `pointer`: anywhere inside a live allocation of the stream's device
  fooKernelArgLocal = 2, // `size` bytes of the work-group's local (shared) memory; `pointer` is NULL
  fooKernelArgErrorFlag = 3, // where the kernel reports failure; `pointer` is the message (a C string, copied)
} fooKernelArgKind;

typedef struct fooKernelArg {
  fooKernelArgKind kind;
  const void* pointer;
  size_t size; // Value and Local: bytes; Buffer and ErrorFlag: 0
} fooKernelArg;

// Runs `function` on `stream` as fooLaunchKernel does, with `nargs` typed arguments (at most
// FOO_MAX_KERNEL_ARGS; Value bytes together at most FOO_MAX_PARAM_BYTES). A kernel that raises
// its ErrorFlag fails its launch: the stream reports fooErrorLaunchFailure at its next
// synchronisation with the flag's message.
// clang-format off: the seam's declarations as docs/porting.md gives them
FOO_API fooError_t fooLaunchKernelArgs(
    fooFunction_t function, fooDim3 gridDim, fooDim3 blockDim,
    const fooKernelArg* args, unsigned int nargs, fooStream_t stream);
// clang-format on
// The checks: `args` may be NULL only when nargs is 0; a Value needs a pointer and size > 0, a
// Buffer and an ErrorFlag a pointer and size 0, a Local size > 0 (within sharedMemPerBlock, all
// Locals of the launch together); anything else is fooErrorInvalidValue. A Buffer that is not
// inside a live allocation of the stream's device is fooErrorInvalidDevicePointer. Several
// blocks that raise one launch's ErrorFlag fail it once.

// Runs fn(userData) on a host thread of the runtime after the work already enqueued on `stream`;
// later work on the stream waits for it (CUDA's cudaLaunchHostFunc). It must not call the runtime.
typedef void (*fooHostFn_t)(void* userData);
FOO_API fooError_t fooLaunchHostFunc(fooStream_t stream, fooHostFn_t fn, void* userData);

// ---- native handles and vendor-library work ----------------------------------------------------

// The vendor API's objects behind the runtime's, for a vendor library (CLBlast, a BLAS): `*native`
// is the device's (OpenCL: cl_device_id) and `*context` its context (cl_context). The emulated device
// has none: fooErrorNotSupported.
FOO_API fooError_t fooDeviceGetNativeHandle(int device, void** native, void** context);
// The buffer and byte offset behind a device address (OpenCL: the arena's cl_mem).
FOO_API fooError_t fooPointerGetNativeHandle(const void* devicePtr, void** buffer, size_t* offset);
// (On the emulated device the buffer is the start of the allocation that holds devicePtr and the
// offset is devicePtr's distance from it. An address that is not inside a live device allocation
// is fooErrorInvalidDevicePointer.)

// Vendor-library work in stream order. fn(queue, args) enqueues work on `queue`, the stream's native
// queue (OpenCL: its cl_command_queue; the emulated device: NULL, fn runs on the stream's worker) and
// must not wait for it. The driver calls fn when the work belongs in the stream's order (on OpenCL
// at once, on the calling thread); while the stream captures it records the call and makes it again
// at every replay of the graph; while tracing, the work appears as one kernel record named `name`.
// `args`: `argsSize` bytes, copied (a captured call owns its copy).
typedef void (*fooNativeFn_t)(void* queue, const void* args);
// clang-format off: the seam's declarations as docs/porting.md gives them
FOO_API fooError_t fooLaunchNative(
    fooStream_t stream, const char* name, fooNativeFn_t fn, const void* args, size_t argsSize);
// clang-format on
// (fn and name must not be NULL; args may be NULL only when argsSize is 0. Like a host function,
// fn must not call the runtime when it runs on a stream's worker.)

// ---- stream capture ----------------------------------------------------------------------------

// How a capture treats the "potentially unsafe" calls, and what a stream's capture is (the graph
// calls below say what they mean).
typedef enum fooStreamCaptureMode {
  fooStreamCaptureModeGlobal = 0,
  fooStreamCaptureModeThreadLocal = 1,
  fooStreamCaptureModeRelaxed = 2,
} fooStreamCaptureMode;

typedef enum fooStreamCaptureStatus {
  fooStreamCaptureStatusNone = 0, // not capturing
  fooStreamCaptureStatusActive = 1,
  fooStreamCaptureStatusInvalidated = 2, // capturing, but a failed call invalidated the capture
} fooStreamCaptureStatus;

// ---- graphs (stream capture) --------------------------------------------------------------------

// While a stream captures, the work submitted to it (kernel and host-function launches and native
// work, which copy their arguments as usual, asynchronous copies of device or pinned memory, fills,
// event records, waits) is recorded into a graph instead of running. A stream that waits for an event recorded
// in the capture joins it: its work is recorded into the same graph, and it must join back (the
// origin stream waits for an event recorded on it after its last work) before the capture ends.
// fooStreamEndCapture returns the graph; fooGraphInstantiate makes it an executable graph and
// fooGraphLaunch runs all of it on a stream as one submission, in the order it was recorded.
//
// Calls that conflict with capture fail with fooErrorStreamCaptureUnsupported and invalidate the
// capture: after that, work submitted to its streams fails with fooErrorStreamCaptureInvalidated, and
// so does fooStreamEndCapture, which ends the capture (the streams work normally again). They are:
// synchronising or querying a capturing stream, fooDeviceSynchronize of its device, querying or
// synchronising an event recorded in the capture, an asynchronous copy of pageable host memory to
// or from a capturing stream, destroying a capturing stream; and, depending on the capture mode,
// the "potentially unsafe" calls fooMemcpy, fooFree and fooFreeHost (which synchronise):
//  - Global: prohibited on the capturing thread and on every other thread;
//  - ThreadLocal: prohibited on the capturing thread only;
//  - Relaxed: permitted.

// Starts capturing `stream` (NULL: the default stream of the current device); fooErrorStreamCaptureUnsupported
// if it already captures.
FOO_API fooError_t fooStreamBeginCapture(fooStream_t stream, fooStreamCaptureMode mode);
// Ends the capture begun on `stream` and returns its graph (the caller destroys it).
FOO_API fooError_t fooStreamEndCapture(fooStream_t stream, fooGraph_t* graph);
FOO_API fooError_t fooStreamIsCapturing(fooStream_t stream, fooStreamCaptureStatus* status);
// As fooStreamIsCapturing, with the capture's id (unique in the process, never 0) in *captureId
// while it captures; captureId may be NULL.
FOO_API fooError_t
fooStreamGetCaptureInfo(fooStream_t stream, fooStreamCaptureStatus* status, unsigned long long* captureId);
// The number of work items (kernels, native work, host functions, copies, fills) in `graph`.
FOO_API fooError_t fooGraphGetNodeCount(fooGraph_t graph, size_t* count);
// An executable copy of `graph`: the graph may be destroyed afterwards.
FOO_API fooError_t fooGraphInstantiate(fooGraphExec_t* exec, fooGraph_t graph);
// Runs the graph's work on `stream` after the work already enqueued there, as one submission.
// Launches of one executable graph never run at the same time, whatever streams they are launched
// on: one waits until the other has finished (as on CUDA), so that the graph's host functions may
// keep state between replays (the CPU fallback's staging buffers).
FOO_API fooError_t fooGraphLaunch(fooGraphExec_t exec, fooStream_t stream);
FOO_API fooError_t fooGraphDestroy(fooGraph_t graph);
// Returns at once; pending launches still run.
FOO_API fooError_t fooGraphExecDestroy(fooGraphExec_t exec);
// Writes the graph as a Graphviz dot file: a node per work item, an edge per dependency.
FOO_API fooError_t fooGraphDebugDotPrint(fooGraph_t graph, const char* path);

#ifdef __cplusplus
} // extern "C"
#endif

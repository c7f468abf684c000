// The device layer: what the runtime's entry points (api_*.cpp) need from a device.
//
// csrc/runtime/emulated/ implements it on the host. A hardware port implements it with its vendor
// driver (a directory beside emulated/, listed in csrc/runtime/CMakeLists.txt) and keeps the entry points, which do
// everything runtime.h promises that is not about the device: they check arguments, keep the fork
// state and the per-thread current device, initialise lazily, resolve a NULL stream to the default
// stream of the current device and record error messages. So every function here is called with
// checked arguments (non-null out-pointers, valid device ordinals and enum values, non-zero sizes,
// resolved streams) in a process that is initialised and not a bad fork child. Handles are the
// driver's own and it owns their objects' lifetime. It validates every handle it is given without
// reading memory through it: a handle that was destroyed (a second destroy, a use after destroy, a
// handle kept while a new object took the old one's place), belongs to another kind, or was never
// a handle is fooErrorInvalidResourceHandle, never a read of freed or foreign memory (runtime.h
// states the rule; the emulated device keeps its handles in one table, emulated/handles.h).
// Failures return a code; a driver with more to say calls fail() (internal.h) to attach its text.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime.h"

namespace torch_foo::driver {

// Devices. device_count() and device_properties() run before initialisation (and in a bad fork
// child): they must not start anything, and device_count() must not load the vendor's drivers
// into the process either (listing OpenCL platforms loads every installed driver, which may start
// threads that a later fork cannot survive): a driver that needs them to count asks a child
// process once and keeps the answer. initialize() runs once, before the first device work.
int device_count();
fooError_t device_properties(int device, fooDeviceProp* prop);
void initialize();
int version();

// Peer access (runtime.h states what it reports); it may run before initialisation.
bool can_access_peer(int device, int peer);

// Monitoring (runtime.h states what each reports); they may run before initialisation. Sensors a
// device lacks answer fooErrorNotSupported. Only runtime.h's monitoring calls use them: a
// project built without those need not implement them.
fooError_t device_metric(int device, fooDeviceMetric metric, uint64_t* value);
fooError_t device_processes(int device, fooProcessInfo* processes, unsigned int* count);

// Memory. malloc(size > 0) on `device`; free() of a pointer that is not a live allocation's start
// is fooErrorInvalidDevicePointer. free() and free_host() wait for pending work. Device pointers
// are addresses in a range the driver reserves (the host need not be able to access it); any
// address inside a live allocation is valid in copies and as a kernel's Buffer argument, and the
// driver maps it to the buffer and offset behind it (pointer_native_handle()).
fooError_t malloc(int device, size_t size, void** ptr);
fooError_t free(void* ptr);
fooError_t mem_get_info(int device, size_t* free, size_t* total);
void pointer_attributes(const void* ptr, fooPointerAttributes* attributes);
fooError_t malloc_host(size_t size, void** ptr);
fooError_t free_host(void* ptr);

// Copies of count > 0 bytes; the driver checks that each side is what `kind` says.
fooError_t memcpy(void* dst, const void* src, size_t count, fooMemcpyKind kind);
fooError_t memcpy_async(void* dst, const void* src, size_t count, fooMemcpyKind kind, fooStream_t stream);
fooError_t memset_async(void* ptr, int value, size_t count, fooStream_t stream);

// Streams. default_stream() creates the device's default stream on first use.
fooStream_t default_stream(int device);
fooError_t stream_create(int device, int priority, fooStream_t* stream);
fooError_t stream_destroy(fooStream_t stream);
fooError_t stream_query(fooStream_t stream);
fooError_t stream_synchronize(fooStream_t stream);
fooError_t stream_wait_event(fooStream_t stream, fooEvent_t event);
fooError_t stream_priority(fooStream_t stream, int* priority);
fooError_t stream_device(fooStream_t stream, int* device);
fooError_t device_synchronize(int device);
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -1;

// Events, created on `device`.
fooError_t event_create(int device, bool timing, fooEvent_t* event);
fooError_t event_record(fooEvent_t event, fooStream_t stream);
fooError_t event_query(fooEvent_t event);
fooError_t event_synchronize(fooEvent_t event);
fooError_t event_elapsed_time(float* ms, fooEvent_t start, fooEvent_t end);
fooError_t event_destroy(fooEvent_t event);

// Modules and launches. The entry points check that the grid and block are not empty and each
// typed argument as runtime.h says (fooLaunchKernelArgs: kinds, pointers, sizes, at most
// FOO_MAX_KERNEL_ARGS arguments whose Value bytes fit FOO_MAX_PARAM_BYTES); the driver checks
// what only it knows: the device's own limits (threads per block, local memory within
// sharedMemPerBlock) and that each Buffer lies inside a live allocation of the stream's device
// (fooErrorInvalidDevicePointer otherwise). launch_kernel() copies every argument before it
// returns. A kernel reports failure through its ErrorFlag argument; the launch then fails with
// the flag's message, reported by the stream's next synchronisation, once per launch.
// module_load_data() builds or loads `size` bytes of `format` for every device; a module that does
// not build or load is fooErrorInvalidKernelImage, with the build log attached by fail().
fooError_t module_load(const char* path, fooModule_t* module);
// clang-format off: the seam's declarations as docs/porting.md gives them
fooError_t module_load_data(
    const void* image, size_t size, fooModuleFormat format, const char* options, fooModule_t* module);
// clang-format on
fooError_t module_get_function(fooModule_t module, const char* name, fooFunction_t* function);
fooError_t module_unload(fooModule_t module);
fooError_t function_name(fooFunction_t function, const char** name);
// clang-format off: the seam's declarations as docs/porting.md gives them
fooError_t launch_kernel(
    fooFunction_t function,
    fooDim3 grid,
    fooDim3 block,
    const fooKernelArg* args,
    unsigned int nargs,
    fooStream_t stream);
// clang-format on
fooError_t launch_host_func(fooStream_t stream, fooHostFn_t fn, void* user_data);

// Native handles and vendor-library work (runtime.h states what each gives). A device without a
// vendor API behind it answers device_native_handle() with fooErrorNotSupported.
// pointer_native_handle() of an address outside every live allocation is
// fooErrorInvalidDevicePointer. launch_native() copies `args`; it calls fn(queue, args) when the
// work belongs in the stream's order (at once, or on the stream's worker), records the call
// instead while the stream captures (a graph makes it again at each launch), and gives it a
// kernel record named `name` while tracing. Vendor libraries enter streams only this way, so that
// capture and tracing see their work.
fooError_t device_native_handle(int device, void** native, void** context);
fooError_t pointer_native_handle(const void* ptr, void** buffer, size_t* offset);
// clang-format off: the seam's declarations as docs/porting.md gives them
fooError_t launch_native(fooStream_t stream, const char* name, fooNativeFn_t fn, const void* args, size_t args_size);
// clang-format on

// Stream capture and graphs (runtime.h's graph calls say what is recorded and what conflicts with a
// capture). The device records the work submitted to a capturing stream instead of running it; the
// calls above that conflict with a capture (synchronising a capturing stream, ...) fail themselves
// with fooErrorStreamCaptureUnsupported. capture_permits_unsafe_call() is asked by the entry points
// of the "potentially unsafe" calls (fooMemcpy, fooFree, fooFreeHost) and applies the capture
// modes; it answers fooSuccess while no stream captures. The other calls here are used only
// by runtime.h's graph calls: a project built without those need not implement them.
fooError_t stream_begin_capture(fooStream_t stream, fooStreamCaptureMode mode);
fooError_t stream_end_capture(fooStream_t stream, fooGraph_t* graph);
fooError_t stream_capture_info(fooStream_t stream, fooStreamCaptureStatus* status, unsigned long long* id);
fooError_t capture_permits_unsafe_call(const char* call);
fooError_t graph_node_count(fooGraph_t graph, size_t* count);
fooError_t graph_instantiate(fooGraph_t graph, fooGraphExec_t* exec);
fooError_t graph_launch(fooGraphExec_t exec, fooStream_t stream);
fooError_t graph_destroy(fooGraph_t graph);
fooError_t graph_exec_destroy(fooGraphExec_t exec);
fooError_t graph_debug_dot_print(fooGraph_t graph, const char* path);

// Tracing (tracing.h). The entry points record the calls; the device layer records what the device
// ran (tracing_records.h says how). timestamp() is the clock of every record, in nanoseconds: the
// device's timer or the host clock it is synchronised with, cheap to read on the host (it stamps
// every traced call). stream_trace_id() is the id records give a stream: unique in the process.
uint64_t timestamp();
fooError_t stream_trace_id(fooStream_t stream, uint32_t* id);

} // namespace torch_foo::driver

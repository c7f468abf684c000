// Activity tracing: the driver's record of what the device did, for profilers.
//
// What CUPTI's activity API is to CUDA, and part of the driver contract (runtime.h) a port keeps.
// A tool (csrc/profiler/KinetoSession.cpp, which turns the records into PyTorch profiler events) subscribes
// one callback, enables the kinds of activity it wants, and brackets the host code it observes with
// its own correlation ids (PyTorch: the operator and the record_function range that is running).
// The runtime then produces records:
//
//  - host records, stamped on the calling thread: a runtime call that gave the device work (a
//    kernel or host-function launch, a copy or fill, an event record) and a host thread that waited
//    for the device (a stream, event or device synchronisation, a copy waiting for its stream);
//  - device records, stamped when the device ran the work: a kernel, a copy, a fill, a stream
//    reaching an event record.
//
// A host record and the device records of the work it enqueued share a correlationId; both carry
// the tool's ids that were pushed on the enqueuing thread (externalId), so a device record can be
// attributed to the operator that launched it even though it ran later, on another thread. A
// kernel's record is named after its function (fooFuncGetName).
//
// Timestamps are nanoseconds on one runtime clock (fooTracingGetTimestamp), for host and
// device records alike. It is not the tool's clock: a tool converts from pairs of readings
// (its own time, fooTracingGetTimestamp()) taken when tracing starts and stops. A hardware driver
// stamps device records with the device's clock and returns that clock here (reading the device's
// timer, or the host clock it is synchronised with), as cuptiGetTimestamp does.
//
// Records are delivered in batches, on the thread that filled a batch or on the thread that calls
// fooTracingFlush. Work enqueued while a kind is enabled is recorded even if it runs after the kind
// is disabled: flush after synchronising to collect everything. When nothing is enabled, the
// runtime records nothing, and each traced call site costs one relaxed atomic load.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fooActivityKind {
  fooActivityKindRuntime = 0, // host: a runtime call that gave the device work
  fooActivityKindKernel = 1, // device: a kernel ran on a stream
  fooActivityKindMemcpy = 2, // device: a copy ran (stream 0: a synchronous copy, run by the caller)
  fooActivityKindMemset = 3, // device: a fill ran on a stream
  fooActivityKindSynchronization = 4, // host: a thread waited for a stream, an event or a device
  fooActivityKindEvent = 5, // device: a stream reached an event record (start == end)
  fooActivityKindCount = 6,
} fooActivityKind;

// The tool's ids a record carries: what was running on the host thread that enqueued the work.
typedef enum fooExternalCorrelationKind {
  fooExternalCorrelationOperator = 0, // the innermost framework operator (PyTorch: an aten op)
  fooExternalCorrelationUser = 1, // the innermost user range (PyTorch: record_function)
  fooExternalCorrelationKindCount = 2,
} fooExternalCorrelationKind;

typedef enum fooSynchronizationKind {
  fooSynchronizationStream = 0, // fooStreamSynchronize, or a copy waiting for its stream
  fooSynchronizationEvent = 1, // fooEventSynchronize
  fooSynchronizationDevice = 2, // fooDeviceSynchronize
} fooSynchronizationKind;

// flags
#define fooActivityFlagDefaultStream 0x1 // `stream` is the default stream of `device`

typedef struct fooActivityRecord {
  fooActivityKind kind;
  uint32_t correlationId; // shared by a Runtime record and the device records of its work; 0: none
  uint64_t start; // nanoseconds, fooTracingGetTimestamp's clock
  uint64_t end; // >= start
  uint64_t externalId[fooExternalCorrelationKindCount]; // ids pushed on the enqueuing thread; 0: none
  const char* name; // Runtime: the call; Kernel: the function's name; others: a fixed description. Valid for
                    // the life of the process (a driver keeps the names of unloaded kernels).
  uint64_t bytes; // Memcpy, Memset: bytes moved or written
  int device; // the device the work ran on or the thread waited for; -1: none
  uint32_t stream; // the stream's id (fooTracingGetStreamId); 0: no stream
  uint32_t threadId; // the OS thread id of the calling (host records) or enqueuing (device records) thread
  uint32_t flags; // fooActivityFlag*
  int detail; // Memcpy: the fooMemcpyKind; Synchronization: the fooSynchronizationKind; else 0
} fooActivityRecord;

// Receives a batch of records (valid only during the call). It must not call the runtime.
typedef void (*fooTracingCallback)(const fooActivityRecord* records, size_t count, void* userData);

// Sets the one subscriber (NULL removes it; records produced without a subscriber are dropped).
// fooErrorNotPermitted if another callback is subscribed.
FOO_API fooError_t fooTracingSubscribe(fooTracingCallback callback, void* userData);
FOO_API fooError_t fooTracingEnable(fooActivityKind kind, int enable);
// Delivers every record produced so far to the subscriber, on the calling thread.
FOO_API fooError_t fooTracingFlush(void);
FOO_API fooError_t fooTracingGetTimestamp(uint64_t* nanoseconds);
// The id records use for `stream` (NULL: the default stream of the current device).
FOO_API fooError_t fooTracingGetStreamId(fooStream_t stream, uint32_t* id);
// A stack per kind and host thread; records carry the top of each stack at enqueue time.
FOO_API fooError_t fooTracingPushExternalId(fooExternalCorrelationKind kind, uint64_t id);
// Pops the top of the stack (into *id unless NULL); fooErrorInvalidValue if it is empty.
FOO_API fooError_t fooTracingPopExternalId(fooExternalCorrelationKind kind, uint64_t* id);

#ifdef __cplusplus
} // extern "C"
#endif

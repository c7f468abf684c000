// The tracing part of the runtime's contract (csrc/runtime/tracing.h), linked into contract_test:
// what csrc/profiler/KinetoSession.cpp relies on. Records appear only while their kind is enabled; a
// launch's host record and its kernel's device record share a correlation id and carry the ids
// pushed on the launching thread; device records come in stream order with plausible times, named
// after the kernel's function; synchronous copies and host waits are recorded too.
#include <cstring>
#include <vector>

#include "../../csrc/runtime/tracing.h"
#include "check.h"
#include "test_kernels.h"

namespace {

std::vector<fooActivityRecord> traced; // what the callback received

void collect(const fooActivityRecord* records, size_t count, void* user_data) {
  EXPECT(user_data == &traced);
  traced.insert(traced.end(), records, records + count);
}

void other_collector(const fooActivityRecord*, size_t, void*) {}

const fooActivityRecord* find_record(fooActivityKind kind, const char* name) {
  for (const auto& r : traced) {
    if (r.kind == kind && (name == nullptr || (r.name != nullptr && std::strcmp(r.name, name) == 0))) {
      return &r;
    }
  }
  return nullptr;
}

void enable_all(int on) {
  for (int kind = 0; kind < fooActivityKindCount; ++kind) {
    OK(fooTracingEnable(static_cast<fooActivityKind>(kind), on));
  }
}

fooError_t launch_sleep(unsigned microseconds, fooStream_t stream) {
  SleepParams p{microseconds};
  const fooDim3 one{1, 1, 1};
  return fooLaunchKernel(test_kernels()->sleep, one, one, &p, sizeof(p), 0, stream);
}

} // namespace

void test_tracing() {
  OK(fooSetDevice(0));
  OK(fooTracingSubscribe(&collect, &traced));
  EXPECT_CODE(fooTracingSubscribe(&other_collector, nullptr), fooErrorNotPermitted);
  EXPECT_CODE(fooTracingEnable(fooActivityKindCount, 1), fooErrorInvalidValue);
  EXPECT_CODE(fooTracingPopExternalId(fooExternalCorrelationOperator, nullptr), fooErrorInvalidValue);
  EXPECT_CODE(fooTracingGetTimestamp(nullptr), fooErrorInvalidValue);
  const char* sleep_name = nullptr;
  OK(fooFuncGetName(&sleep_name, test_kernels()->sleep));
  fooStream_t stream = nullptr;
  OK(fooStreamCreate(&stream));
  uint32_t stream_id = 0;
  uint32_t default_id = 0;
  OK(fooTracingGetStreamId(stream, &stream_id));
  OK(fooTracingGetStreamId(nullptr, &default_id));
  EXPECT(stream_id != 0 && default_id != 0 && stream_id != default_id);
  void* device_memory = nullptr;
  void* pinned = nullptr;
  OK(fooMalloc(&device_memory, 4096));
  OK(fooMallocHost(&pinned, 4096));
  // Off: nothing is recorded.
  OK(launch_sleep(1000, stream));
  OK(fooStreamSynchronize(stream));
  OK(fooTracingFlush());
  EXPECT(traced.empty());
  // On: host records of the calls, device records of their work.
  enable_all(1);
  uint64_t before = 0;
  OK(fooTracingGetTimestamp(&before));
  OK(fooTracingPushExternalId(fooExternalCorrelationOperator, 41));
  OK(fooTracingPushExternalId(fooExternalCorrelationOperator, 42));
  OK(fooTracingPushExternalId(fooExternalCorrelationUser, 7));
  OK(launch_sleep(20000, stream));
  OK(fooMemcpyAsync(device_memory, pinned, 4096, fooMemcpyHostToDevice, stream));
  OK(fooMemsetAsync(device_memory, 0, 1000, stream));
  uint64_t popped = 0;
  OK(fooTracingPopExternalId(fooExternalCorrelationOperator, &popped));
  EXPECT(popped == 42);
  OK(fooStreamSynchronize(stream));
  char host[64];
  OK(fooMemcpy(host, device_memory, sizeof(host), fooMemcpyDeviceToHost));
  OK(fooTracingFlush());
  uint64_t after = 0;
  OK(fooTracingGetTimestamp(&after));
  const auto* launch = find_record(fooActivityKindRuntime, "fooLaunchKernel");
  const auto* kernel = find_record(fooActivityKindKernel, sleep_name);
  const auto* copy = find_record(fooActivityKindMemcpy, "Memcpy HtoD");
  const auto* fill = find_record(fooActivityKindMemset, nullptr);
  const auto* sync_copy = find_record(fooActivityKindMemcpy, "Memcpy DtoH");
  const auto* wait = find_record(fooActivityKindSynchronization, nullptr);
  EXPECT(launch != nullptr && kernel != nullptr && copy != nullptr && fill != nullptr);
  EXPECT(sync_copy != nullptr && wait != nullptr);
  if (launch != nullptr && kernel != nullptr && copy != nullptr && fill != nullptr && sync_copy != nullptr &&
      wait != nullptr) {
    // A launch and its kernel share a correlation id; the kernel carries the ids pushed when it
    // was launched, not those on top when it ran.
    EXPECT(launch->correlationId != 0 && launch->correlationId == kernel->correlationId);
    EXPECT(copy->correlationId != kernel->correlationId);
    EXPECT(kernel->externalId[fooExternalCorrelationOperator] == 42);
    EXPECT(kernel->externalId[fooExternalCorrelationUser] == 7);
    EXPECT(sync_copy->externalId[fooExternalCorrelationOperator] == 41);
    EXPECT(kernel->device == 0 && kernel->stream == stream_id && launch->device == 0 && launch->threadId != 0);
    EXPECT(kernel->threadId == launch->threadId && (kernel->flags & fooActivityFlagDefaultStream) == 0);
    // The device ran the kernel after the call enqueued it, for about the 20 ms it sleeps, then
    // the copy and the fill in stream order.
    EXPECT(before <= launch->start && launch->start <= launch->end && launch->end <= kernel->end);
    EXPECT(kernel->start >= launch->start && kernel->end - kernel->start >= 15000000ull);
    EXPECT(copy->start >= kernel->end && fill->start >= copy->end && fill->end <= after);
    EXPECT(copy->bytes == 4096 && copy->detail == fooMemcpyHostToDevice && fill->bytes == 1000);
    EXPECT(sync_copy->stream == 0 && sync_copy->bytes == sizeof(host) && sync_copy->device == 0);
    EXPECT(wait->detail == fooSynchronizationStream && wait->stream == stream_id);
    EXPECT(wait->end >= fill->end);
  }
  // Work on the default stream is flagged so. A typed launch and native work are recorded as
  // launches: native work as a kernel named as the call named it.
  traced.clear();
  OK(launch_sleep(1000, nullptr));
  int* counter = static_cast<int*>(device_memory);
  OK(test_launch_stamp(counter, counter + 1, nullptr));
  TestNativeStamp native{};
  OK(fooPointerGetNativeHandle(counter, &native.counter_buffer, &native.counter_offset));
  OK(fooPointerGetNativeHandle(counter + 2, &native.slot_buffer, &native.slot_offset));
  OK(fooLaunchNative(nullptr, "test native stamp", &test_native_stamp, &native, sizeof(native)));
  OK(fooDeviceSynchronize());
  OK(fooTracingFlush());
  const auto* typed_launch = find_record(fooActivityKindRuntime, "fooLaunchKernelArgs");
  const auto* native_launch = find_record(fooActivityKindRuntime, "fooLaunchNative");
  const auto* native_work = find_record(fooActivityKindKernel, "test native stamp");
  EXPECT(typed_launch != nullptr && native_launch != nullptr && native_work != nullptr);
  if (native_launch != nullptr && native_work != nullptr) {
    EXPECT(native_launch->correlationId != 0 && native_launch->correlationId == native_work->correlationId);
    EXPECT(native_work->stream == default_id && native_work->start >= native_launch->start);
  }
  const auto* on_default = find_record(fooActivityKindKernel, sleep_name);
  EXPECT(on_default != nullptr && on_default->stream == default_id);
  EXPECT(on_default != nullptr && (on_default->flags & fooActivityFlagDefaultStream) != 0);
  const auto* device_wait = find_record(fooActivityKindSynchronization, nullptr);
  EXPECT(device_wait != nullptr && device_wait->detail == fooSynchronizationDevice);
  // Disabled again: work is not recorded; an unsubscribed runtime drops what it records.
  enable_all(0);
  traced.clear();
  OK(launch_sleep(1000, stream));
  OK(fooStreamSynchronize(stream));
  OK(fooTracingFlush());
  EXPECT(traced.empty());
  OK(fooTracingPopExternalId(fooExternalCorrelationOperator, nullptr));
  OK(fooTracingPopExternalId(fooExternalCorrelationUser, nullptr));
  OK(fooTracingSubscribe(nullptr, nullptr));
  OK(fooTracingSubscribe(&other_collector, nullptr));
  OK(fooTracingSubscribe(nullptr, nullptr));
  OK(fooStreamDestroy(stream));
  OK(fooFreeHost(pinned));
  OK(fooFree(device_memory));
}

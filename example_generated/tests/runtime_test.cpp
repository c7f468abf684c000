// Conformance test of the runtime API (csrc/runtime/runtime.h), without PyTorch.
//
// tests/test_runtime.py compiles this file with csrc/runtime/runtime.cpp and runs it. A port to
// hardware can run it against its own runtime.cpp: it checks the semantics that csrc/core relies
// on (error codes, stream order, events, memory accounting, pinned memory, fork safety).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "../csrc/runtime/runtime.h"

namespace {

int failures = 0;

#define EXPECT(condition) \
  do { \
    if (!(condition)) { \
      std::fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #condition); \
      ++failures; \
    } \
  } while (0)

#define EXPECT_CODE(call, code) EXPECT((call) == (code))
#define OK(call) EXPECT_CODE(call, fooSuccess)

int sleep_kernel(void* args) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(args)));
  return 0;
}

struct Append {
  std::vector<int>* order;
  int value;
};

int append_kernel(void* args) {
  auto* a = static_cast<Append*>(args);
  a->order->push_back(a->value);
  return 0;
}

// Writes 9 into the first 100 bytes of a device allocation, reaching it as kernels do.
int fill_nines_kernel(void* args) {
  std::memset(fooKernelAddress(args), 9, 100);
  return 0;
}

int failing_kernel(void*) {
  return 1;
}

int synchronize_own_stream_kernel(void* args) {
  *static_cast<fooError_t*>(args) = fooStreamSynchronize(nullptr);
  return 0;
}

void test_devices() {
  int count = 0;
  OK(fooGetDeviceCount(&count));
  EXPECT(count == 2);
  EXPECT_CODE(fooGetDeviceCount(nullptr), fooErrorInvalidValue);
  EXPECT_CODE(fooSetDevice(count), fooErrorInvalidDevice);
  EXPECT_CODE(fooSetDevice(-1), fooErrorInvalidDevice);
  int device = -1;
  OK(fooGetDevice(&device));
  EXPECT(device == 0);
  fooDeviceProp prop;
  OK(fooGetDeviceProperties(&prop, 1));
  EXPECT(prop.totalGlobalMem == (size_t{64} << 20));
  EXPECT(std::strstr(prop.name, "1") != nullptr);
  int least = 1;
  int greatest = 1;
  OK(fooDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT(least == 0 && greatest == -1);
  std::thread([] {
    int other = -1;
    OK(fooGetDevice(&other));
    EXPECT(other == 0); // the current device is per thread
    OK(fooSetDevice(1));
  }).join();
  OK(fooGetDevice(&device));
  EXPECT(device == 0);
}

void test_memory() {
  size_t free_before = 0;
  size_t total = 0;
  OK(fooMemGetInfo(&free_before, &total));
  EXPECT(total == (size_t{64} << 20));
  void* p = nullptr;
  OK(fooMalloc(&p, 1000));
  size_t free_after = 0;
  OK(fooMemGetInfo(&free_after, &total));
  EXPECT(free_after < free_before);
  fooPointerAttributes a;
  OK(fooPointerGetAttributes(&a, static_cast<char*>(p) + 10));
  EXPECT(a.type == fooMemoryTypeDevice && a.device == 0 && a.base == p && a.size >= 1000);
  int host = 0;
  OK(fooPointerGetAttributes(&a, &host));
  EXPECT(a.type == fooMemoryTypeUnregistered && a.device == -1);
  EXPECT_CODE(fooFree(&host), fooErrorInvalidDevicePointer);
  EXPECT_CODE(fooFree(static_cast<char*>(p) + 64), fooErrorInvalidDevicePointer);
  void* big = nullptr;
  EXPECT_CODE(fooMalloc(&big, size_t{65} << 20), fooErrorMemoryAllocation);
  // Copies check both sides.
  std::vector<char> in(1000, 7);
  std::vector<char> out(1000, 0);
  OK(fooMemcpy(p, in.data(), 1000, fooMemcpyHostToDevice));
  OK(fooMemcpy(out.data(), p, 1000, fooMemcpyDeviceToHost));
  EXPECT(out == in);
  EXPECT_CODE(fooMemcpy(out.data(), in.data(), 10, fooMemcpyDeviceToHost), fooErrorInvalidDevicePointer);
  EXPECT_CODE(fooMemcpy(p, p, 10, fooMemcpyHostToDevice), fooErrorInvalidDevicePointer);
  const size_t too_many = size_t{1} << 20; // more bytes than the allocation holds
  EXPECT_CODE(fooMemcpy(p, in.data(), too_many, fooMemcpyHostToDevice), fooErrorInvalidDevicePointer);
  OK(fooLaunchKernel(&fill_nines_kernel, p, nullptr));
  OK(fooStreamSynchronize(nullptr));
  OK(fooMemcpy(out.data(), p, 1000, fooMemcpyDeviceToHost));
  EXPECT(out[0] == 9 && out[99] == 9 && out[100] == 7);
  OK(fooMemsetAsync(p, 3, 1000, nullptr));
  OK(fooStreamSynchronize(nullptr));
  OK(fooMemcpy(out.data(), p, 1000, fooMemcpyDeviceToHost));
  EXPECT(out[0] == 3 && out[999] == 3);
  OK(fooFree(p));
  EXPECT_CODE(fooFree(p), fooErrorInvalidDevicePointer);
  OK(fooMemGetInfo(&free_after, &total));
  EXPECT(free_after == free_before);
  EXPECT(fooKernelAddress(&host) == &host);
}

void test_pinned_memory() {
  void* pinned = nullptr;
  OK(fooMallocHost(&pinned, 4096));
  fooPointerAttributes a;
  OK(fooPointerGetAttributes(&a, static_cast<char*>(pinned) + 100));
  EXPECT(a.type == fooMemoryTypeHost && a.base == pinned);
  void* device = nullptr;
  OK(fooMalloc(&device, 4096));
  std::memset(pinned, 5, 4096);
  int ms = 100;
  OK(fooLaunchKernel(&sleep_kernel, &ms, nullptr));
  OK(fooMemcpyAsync(device, pinned, 4096, fooMemcpyHostToDevice, nullptr));
  EXPECT_CODE(fooStreamQuery(nullptr), fooErrorNotReady); // pinned: enqueued behind the sleep
  OK(fooStreamSynchronize(nullptr));
  std::vector<char> pageable(4096, 0);
  OK(fooLaunchKernel(&sleep_kernel, &ms, nullptr));
  OK(fooMemcpyAsync(pageable.data(), device, 4096, fooMemcpyDeviceToHost, nullptr));
  EXPECT(pageable[4095] == 5); // pageable: done when the call returns
  OK(fooStreamQuery(nullptr));
  OK(fooFree(device));
  OK(fooFreeHost(pinned));
  EXPECT_CODE(fooFreeHost(pinned), fooErrorInvalidValue);
}

void test_streams() {
  fooStream_t a = nullptr;
  fooStream_t b = nullptr;
  OK(fooStreamCreate(&a));
  OK(fooStreamCreateWithPriority(&b, fooStreamNonBlocking, -5));
  int priority = 0;
  OK(fooStreamGetPriority(b, &priority));
  EXPECT(priority == -1); // clamped to the range
  int device = -1;
  OK(fooStreamGetDevice(a, &device));
  EXPECT(device == 0);
  EXPECT_CODE(fooStreamCreateWithPriority(&b, 0x80, 0), fooErrorInvalidValue);
  // In order on one stream, asynchronous to the host, independent of other streams.
  std::vector<int> order;
  int ms = 100;
  std::vector<Append> appends;
  for (int i = 0; i < 50; ++i) {
    appends.push_back({&order, i});
  }
  OK(fooLaunchKernel(&sleep_kernel, &ms, a));
  for (auto& append : appends) {
    OK(fooLaunchKernel(&append_kernel, &append, a));
  }
  EXPECT_CODE(fooStreamQuery(a), fooErrorNotReady);
  OK(fooStreamQuery(b));
  OK(fooStreamSynchronize(a));
  EXPECT(order.size() == 50);
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    EXPECT(order[i] == i);
  }
  // A failing kernel is reported once, at the next synchronisation, and later work still runs.
  OK(fooLaunchKernel(&failing_kernel, nullptr, a));
  order.clear();
  OK(fooLaunchKernel(&append_kernel, &appends[0], a));
  EXPECT_CODE(fooStreamSynchronize(a), fooErrorLaunchFailure);
  OK(fooStreamSynchronize(a));
  EXPECT(order.size() == 1);
  // Waiting for a stream from a kernel on that stream would never return.
  fooError_t inner = fooSuccess;
  OK(fooLaunchKernel(&synchronize_own_stream_kernel, &inner, nullptr));
  OK(fooDeviceSynchronize());
  EXPECT(inner == fooErrorNotPermitted);
  // Destroying returns at once; pending work still runs.
  OK(fooLaunchKernel(&sleep_kernel, &ms, b));
  OK(fooStreamDestroy(b));
  OK(fooStreamDestroy(a));
  EXPECT_CODE(fooStreamDestroy(nullptr), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooLaunchKernel(nullptr, nullptr, nullptr), fooErrorInvalidValue);
  OK(fooDeviceSynchronize());
}

void test_events() {
  fooStream_t producer = nullptr;
  fooStream_t consumer = nullptr;
  OK(fooStreamCreate(&producer));
  OK(fooStreamCreate(&consumer));
  fooEvent_t start = nullptr;
  fooEvent_t end = nullptr;
  fooEvent_t plain = nullptr;
  OK(fooEventCreate(&start));
  OK(fooEventCreate(&end));
  OK(fooEventCreateWithFlags(&plain, fooEventDisableTiming));
  OK(fooEventQuery(plain)); // never recorded
  int ms = 50;
  OK(fooEventRecord(start, producer));
  OK(fooLaunchKernel(&sleep_kernel, &ms, producer));
  OK(fooEventRecord(end, producer));
  OK(fooEventRecord(plain, producer));
  EXPECT_CODE(fooEventQuery(end), fooErrorNotReady);
  float elapsed = 0;
  EXPECT_CODE(fooEventElapsedTime(&elapsed, start, end), fooErrorNotReady);
  // The consumer waits for the producer's event (after the first sleep), not for later work.
  std::vector<int> order;
  Append on_producer{&order, 1};
  Append on_consumer{&order, 2};
  int longer = 200;
  OK(fooStreamWaitEvent(consumer, plain, 0));
  OK(fooLaunchKernel(&append_kernel, &on_consumer, consumer));
  OK(fooLaunchKernel(&sleep_kernel, &longer, producer));
  OK(fooLaunchKernel(&append_kernel, &on_producer, producer));
  EXPECT_CODE(fooStreamWaitEvent(consumer, plain, 1), fooErrorInvalidValue);
  EXPECT_CODE(fooStreamQuery(consumer), fooErrorNotReady);
  OK(fooStreamSynchronize(consumer));
  EXPECT(order.size() == 1 && order[0] == 2);
  OK(fooStreamSynchronize(producer));
  EXPECT(order.size() == 2 && order[1] == 1);
  OK(fooEventSynchronize(end));
  OK(fooEventElapsedTime(&elapsed, start, end));
  EXPECT(elapsed >= 49.0f && elapsed < 60000.0f);
  EXPECT_CODE(fooEventElapsedTime(&elapsed, start, plain), fooErrorInvalidResourceHandle);
  // An event belongs to its device.
  OK(fooSetDevice(1));
  fooStream_t other = nullptr;
  OK(fooStreamCreate(&other));
  EXPECT_CODE(fooEventRecord(start, other), fooErrorInvalidResourceHandle);
  OK(fooStreamDestroy(other));
  OK(fooSetDevice(0));
  OK(fooEventDestroy(start));
  OK(fooEventDestroy(end));
  OK(fooEventDestroy(plain));
  OK(fooStreamDestroy(producer));
  OK(fooStreamDestroy(consumer));
}

void test_fork() {
  int bad = 1;
  OK(fooIsInBadFork(&bad));
  EXPECT(bad == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    int child_bad = 0;
    void* p = nullptr;
    int count = 0;
    const bool marked = fooIsInBadFork(&child_bad) == fooSuccess && child_bad == 1;
    const bool refused = fooMalloc(&p, 16) == fooErrorForkedAfterInit;
    const bool refused_too = fooStreamSynchronize(nullptr) == fooErrorForkedAfterInit;
    const bool counted = fooGetDeviceCount(&count) == fooSuccess && count == 2;
    _exit(marked && refused && refused_too && counted ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

} // namespace

int main() {
  test_devices();
  test_memory();
  test_pinned_memory();
  test_streams();
  test_events();
  test_fork();
  if (failures == 0) {
    std::printf("runtime conformance: all checks passed\n");
  }
  return failures == 0 ? 0 : 1;
}

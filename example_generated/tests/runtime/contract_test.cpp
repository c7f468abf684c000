// The runtime's contract (csrc/runtime/runtime.h) as a program: what csrc/core and the operator
// library rely on, checked without PyTorch. tests/test_runtime.py builds it against the runtime
// library the extension links and runs it. It assumes nothing about the device beyond runtime.h and
// test_kernels.h (test kernels launched with typed arguments, a test module, native work): no
// kernel ABI, so a hardware port runs it unchanged (with its own test kernels): run it first after
// every change to the driver. The emulation's own behaviour (strict
// memory, its environment variables, host-function kernels) is checked by emulation_test.cpp. The
// activity tracing of tracing.h, which the profiler reads, is checked by tracing_contract.cpp; the
// calls that come with a feature (graphs, monitoring) by that feature's own file of this directory,
// which registers its checks (check.h) for main() to run.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "test_kernels.h"

namespace {

const TestKernels& k() {
  return *test_kernels();
}

const fooDim3 kOne{1, 1, 1};

fooError_t launch_sleep(unsigned microseconds, fooStream_t stream) {
  SleepParams p{microseconds};
  return fooLaunchKernel(k().sleep, kOne, kOne, &p, sizeof(p), 0, stream);
}

fooError_t launch_stamp(int* counter, int* slot, fooStream_t stream) {
  return test_launch_stamp(counter, slot, stream);
}

template <typename T>
std::vector<T> download(const void* device, size_t n) {
  std::vector<T> host(n);
  OK(fooMemcpy(host.data(), device, n * sizeof(T), fooMemcpyDeviceToHost));
  return host;
}

// Runs first: nothing may have initialised the runtime yet.
void test_lazy_initialisation() {
  int count = 0;
  OK(fooGetDeviceCount(&count));
  fooDeviceProp prop;
  OK(fooGetDeviceProperties(&prop, 0));
  OK(fooSetDevice(0));
  int initialized = 1;
  OK(fooDeviceIsInitialized(0, &initialized));
  EXPECT(initialized == 0);
  // A fork now makes a healthy child: nothing was initialised.
  const pid_t pid = fork();
  if (pid == 0) {
    void* p = nullptr;
    const bool ok = fooMalloc(&p, 16) == fooSuccess && fooFree(p) == fooSuccess;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Several threads whose first calls race: each must find the runtime fully initialised (one thread
  // initialises, the others wait for it), so its fresh allocation is at once a valid copy target.
  // Each round is a new child, forked before anything initialised the runtime.
  constexpr int kRounds = 40;
  constexpr int kThreads = 8;
  for (int round = 0; round < kRounds; ++round) {
    const pid_t racer = fork();
    if (racer == 0) {
      std::atomic<int> waiting{kThreads};
      std::atomic<int> good{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          waiting.fetch_sub(1);
          while (waiting.load() > 0) {
          }
          // Staggered by a few microseconds, so that later threads arrive while the first initialises.
          const auto start = std::chrono::steady_clock::now();
          while (std::chrono::steady_clock::now() - start < std::chrono::microseconds(t * (round % 8 + 1))) {
          }
          const long long value = 1000 * round + t;
          long long back = 0;
          void* p = nullptr;
          bool ok = fooSetDevice(t % count) == fooSuccess;
          ok = ok && fooMalloc(&p, sizeof(value)) == fooSuccess;
          ok = ok && fooMemcpy(p, &value, sizeof(value), fooMemcpyHostToDevice) == fooSuccess;
          ok = ok && fooMemcpy(&back, p, sizeof(back), fooMemcpyDeviceToHost) == fooSuccess;
          ok = ok && back == value && fooFree(p) == fooSuccess;
          if (ok) {
            good.fetch_add(1);
          } else {
            std::fprintf(stderr, "first use by thread %d, round %d: %s\n", t, round, fooGetLastErrorMessage());
          }
        });
      }
      for (std::thread& thread : threads) {
        thread.join();
      }
      _exit(good.load() == kThreads ? 0 : 1);
    }
    int raced = 0;
    waitpid(racer, &raced, 0);
    EXPECT(WIFEXITED(raced) && WEXITSTATUS(raced) == 0);
  }
}

void test_errors_and_versions() {
  const fooError_t codes[] = {
      fooSuccess,
      fooErrorInvalidValue,
      fooErrorInvalidDevice,
      fooErrorMemoryAllocation,
      fooErrorInvalidDevicePointer,
      fooErrorInvalidResourceHandle,
      fooErrorNotReady,
      fooErrorNoDevice,
      fooErrorLaunchFailure,
      fooErrorNotPermitted,
      fooErrorForkedAfterInit,
      fooErrorNotSupported,
      fooErrorNotFound,
      fooErrorInvalidKernelImage,
      fooErrorUnknown};
  for (const fooError_t code : codes) {
    EXPECT(fooGetErrorString(code) != nullptr && fooGetErrorString(code)[0] != '\0');
  }
  int version = 0;
  OK(fooRuntimeGetVersion(&version));
  EXPECT(version == FOO_RUNTIME_VERSION);
  OK(fooDriverGetVersion(&version));
  EXPECT(version > 0);
  EXPECT_CODE(fooRuntimeGetVersion(nullptr), fooErrorInvalidValue);
  // The last failure on this thread is described, and other threads keep their own.
  EXPECT_CODE(fooSetDevice(-7), fooErrorInvalidDevice);
  EXPECT(std::strstr(fooGetLastErrorMessage(), "-7") != nullptr);
  std::thread([] {
    EXPECT(std::strstr(fooGetLastErrorMessage(), "-7") == nullptr);
    EXPECT_CODE(fooGetDeviceCount(nullptr), fooErrorInvalidValue);
    EXPECT(fooGetLastErrorMessage()[0] != '\0');
  }).join();
  EXPECT(std::strstr(fooGetLastErrorMessage(), "-7") != nullptr);
}

void test_devices() {
  int count = 0;
  OK(fooGetDeviceCount(&count));
  EXPECT(count >= 1 && count <= FOO_MAX_DEVICES);
  EXPECT_CODE(fooGetDeviceCount(nullptr), fooErrorInvalidValue);
  EXPECT_CODE(fooSetDevice(count), fooErrorInvalidDevice);
  EXPECT_CODE(fooSetDevice(-1), fooErrorInvalidDevice);
  EXPECT_CODE(fooGetDeviceProperties(nullptr, 0), fooErrorInvalidValue);
  fooDeviceProp prop;
  EXPECT_CODE(fooGetDeviceProperties(&prop, count), fooErrorInvalidDevice);
  for (int d = 0; d < count; ++d) {
    OK(fooGetDeviceProperties(&prop, d));
    EXPECT(prop.name[0] != '\0' && prop.totalGlobalMem > 0);
    EXPECT(prop.multiProcessorCount >= 1 && prop.maxThreadsPerBlock >= 1);
  }
  int device = -1;
  OK(fooGetDevice(&device));
  EXPECT(device == 0);
  int least = 1;
  int greatest = 1;
  OK(fooDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT(greatest <= least);
  std::thread([count] {
    int other = -1;
    OK(fooGetDevice(&other));
    EXPECT(other == 0); // the current device is per thread, and starts at 0
    OK(fooSetDevice(count - 1));
  }).join();
  OK(fooGetDevice(&device));
  EXPECT(device == 0);
}

// Peer access, and stream handles received from other code.
void test_peer_access_and_foreign_handles() {
  int count = 0;
  OK(fooGetDeviceCount(&count));
  int access = -1;
  EXPECT_CODE(fooDeviceCanAccessPeer(nullptr, 0, 0), fooErrorInvalidValue);
  EXPECT_CODE(fooDeviceCanAccessPeer(&access, 0, count), fooErrorInvalidDevice);
  EXPECT_CODE(fooDeviceCanAccessPeer(&access, -1, 0), fooErrorInvalidDevice);
  OK(fooDeviceCanAccessPeer(&access, 0, 0));
  EXPECT(access == 0); // a device is not its own peer
  for (int d = 1; d < count; ++d) {
    OK(fooDeviceCanAccessPeer(&access, 0, d));
    EXPECT(access == 0 || access == 1);
  }

  // A handle received from other code is checked through StreamGetDevice, whatever its value.
  int owner = -1;
  const auto unknown = reinterpret_cast<fooStream_t>(uintptr_t{0x1234});
  EXPECT_CODE(fooStreamGetDevice(unknown, &owner), fooErrorInvalidResourceHandle);
  fooStream_t created = nullptr;
  OK(fooSetDevice(0));
  OK(fooStreamCreate(&created));
  OK(fooStreamGetDevice(created, &owner));
  EXPECT(owner == 0);
  OK(fooStreamDestroy(created));
}

void test_memory() {
  size_t free_before = 0;
  size_t total = 0;
  OK(fooMemGetInfo(&free_before, &total));
  EXPECT(total > 0 && free_before <= total);
  void* p = nullptr;
  OK(fooMalloc(&p, 1000));
  EXPECT(p != nullptr);
  int initialized = 0;
  OK(fooDeviceIsInitialized(0, &initialized));
  EXPECT(initialized == 1);
  void* empty = &initialized;
  OK(fooMalloc(&empty, 0));
  EXPECT(empty == nullptr);
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
  OK(fooFree(nullptr));
  // Out of memory is an error the process survives.
  void* big = nullptr;
  EXPECT_CODE(fooMalloc(&big, total + 1), fooErrorMemoryAllocation);
  EXPECT(fooGetLastErrorMessage()[0] != '\0');
  // Copies check both sides.
  std::vector<char> in(1000, 7);
  std::vector<char> out(1000, 0);
  OK(fooMemcpy(p, in.data(), 1000, fooMemcpyHostToDevice));
  OK(fooMemcpy(out.data(), p, 1000, fooMemcpyDeviceToHost));
  EXPECT(out == in);
  EXPECT_CODE(fooMemcpy(out.data(), in.data(), 10, fooMemcpyDeviceToHost), fooErrorInvalidDevicePointer);
  EXPECT_CODE(fooMemcpy(p, p, 10, fooMemcpyHostToDevice), fooErrorInvalidDevicePointer);
  const size_t too_many = size_t{1} << 30; // more bytes than the allocation holds
  EXPECT_CODE(fooMemcpy(p, in.data(), too_many, fooMemcpyHostToDevice), fooErrorInvalidDevicePointer);
  EXPECT_CODE(fooMemcpy(p, in.data(), 10, static_cast<fooMemcpyKind>(9)), fooErrorInvalidValue);
  OK(fooMemcpy(nullptr, nullptr, 0, fooMemcpyHostToDevice));
  void* q = nullptr;
  OK(fooMalloc(&q, 1000));
  OK(fooMemcpy(q, p, 1000, fooMemcpyDeviceToDevice));
  EXPECT(download<char>(q, 1000) == in);
  OK(fooMemsetAsync(p, 3, 1000, nullptr));
  OK(fooStreamSynchronize(nullptr));
  const auto filled = download<char>(p, 1000);
  EXPECT(filled[0] == 3 && filled[999] == 3);
  EXPECT_CODE(fooMemsetAsync(&host, 0, 4, nullptr), fooErrorInvalidDevicePointer);
  OK(fooFree(p));
  OK(fooFree(q));
  EXPECT_CODE(fooFree(p), fooErrorInvalidDevicePointer);
  OK(fooMemGetInfo(&free_after, &total));
  EXPECT(free_after == free_before);
}

void test_pinned_memory() {
  void* pinned = nullptr;
  OK(fooMallocHost(&pinned, 4096));
  fooPointerAttributes a;
  OK(fooPointerGetAttributes(&a, static_cast<char*>(pinned) + 100));
  EXPECT(a.type == fooMemoryTypeHost && a.base == pinned && a.device == -1);
  void* device = nullptr;
  OK(fooMalloc(&device, 4096));
  std::memset(pinned, 5, 4096);
  OK(launch_sleep(100000, nullptr));
  OK(fooMemcpyAsync(device, pinned, 4096, fooMemcpyHostToDevice, nullptr));
  EXPECT_CODE(fooStreamQuery(nullptr), fooErrorNotReady); // pinned: enqueued behind the sleep
  OK(fooStreamSynchronize(nullptr));
  std::vector<char> pageable(4096, 0);
  OK(launch_sleep(100000, nullptr));
  OK(fooMemcpyAsync(pageable.data(), device, 4096, fooMemcpyDeviceToHost, nullptr));
  EXPECT(pageable[4095] == 5); // pageable: done when the call returns
  OK(fooStreamQuery(nullptr));
  OK(fooFree(device));
  OK(fooFreeHost(pinned));
  EXPECT_CODE(fooFreeHost(pinned), fooErrorInvalidValue);
}

// An asynchronous copy from pageable memory returns once the memory may be reused: the caller may
// overwrite it at once, even while the stream is still busy (a driver may stage the bytes, OpenCL's
// up to 256 KiB, and copy them later in the stream's order). More copies than a driver has staging
// buffers, of sizes on both sides of its limit, each into its own part of the allocation.
void test_pageable_copies_may_reuse_the_memory_at_once() {
  constexpr size_t kSizes[] = {4, 4096, 65536, 256 << 10, (256 << 10) + 4096};
  constexpr int kRounds = 8;
  size_t total = 0;
  for (const size_t size : kSizes) {
    total += size * kRounds;
  }
  char* device = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&device), total));
  OK(fooMemsetAsync(device, 0, total, nullptr));
  OK(launch_sleep(100000, nullptr)); // the copies queue behind it (or wait for it)
  std::vector<char> expected(total);
  std::vector<char> pageable;
  size_t at = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (const size_t size : kSizes) {
      pageable.assign(size, static_cast<char>(1 + round * 7 + size % 5));
      std::memcpy(expected.data() + at, pageable.data(), size);
      OK(fooMemcpyAsync(device + at, pageable.data(), size, fooMemcpyHostToDevice, nullptr));
      std::memset(pageable.data(), 0x55, size); // reused at once
      at += size;
    }
  }
  // A later fill of the first bytes runs after the copies, in the stream's order.
  OK(fooMemsetAsync(device, 9, 4, nullptr));
  std::memset(expected.data(), 9, 4);
  std::vector<char> back(total, 0);
  OK(fooMemcpyAsync(back.data(), device, total, fooMemcpyDeviceToHost, nullptr));
  EXPECT(back == expected); // pageable to the host: done when the call returns
  OK(fooStreamQuery(nullptr));
  OK(fooFree(device));
}

void test_streams() {
  fooStream_t a = nullptr;
  fooStream_t b = nullptr;
  OK(fooStreamCreate(&a));
  OK(fooStreamCreateWithPriority(&b, fooStreamNonBlocking, -5));
  int least = 0;
  int greatest = 0;
  OK(fooDeviceGetStreamPriorityRange(&least, &greatest));
  int priority = 0;
  OK(fooStreamGetPriority(b, &priority));
  EXPECT(priority == greatest); // clamped to the range
  int device = -1;
  OK(fooStreamGetDevice(a, &device));
  EXPECT(device == 0);
  EXPECT_CODE(fooStreamCreateWithPriority(&b, 0x80, 0), fooErrorInvalidValue);
  // In order on one stream, asynchronous to the host, independent of other streams.
  constexpr int kStamps = 50;
  int* counter = nullptr;
  int* slots = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counter), sizeof(int)));
  OK(fooMalloc(reinterpret_cast<void**>(&slots), kStamps * sizeof(int)));
  OK(fooMemsetAsync(counter, 0, sizeof(int), a));
  OK(launch_sleep(100000, a));
  for (int i = 0; i < kStamps; ++i) {
    OK(launch_stamp(counter, slots + i, a));
  }
  EXPECT_CODE(fooStreamQuery(a), fooErrorNotReady);
  OK(fooStreamQuery(b));
  OK(fooStreamSynchronize(a));
  const auto order = download<int>(slots, kStamps);
  for (int i = 0; i < kStamps; ++i) {
    EXPECT(order[i] == i);
  }
  // A failing kernel is reported once, with its message, at the next synchronisation; later work
  // still runs.
  OK(test_launch_trap(kOne, 42, "trap 42", a));
  OK(launch_stamp(counter, slots, a));
  EXPECT_CODE(fooStreamSynchronize(a), fooErrorLaunchFailure);
  EXPECT(std::strstr(fooGetLastErrorMessage(), "42") != nullptr);
  OK(fooStreamSynchronize(a));
  EXPECT(download<int>(slots, 1)[0] == kStamps);
  OK(test_launch_trap(kOne, 42, "trap 42", a));
  EXPECT_CODE(fooDeviceSynchronize(), fooErrorLaunchFailure);
  OK(fooDeviceSynchronize());
  // Destroying returns at once; pending work still runs.
  OK(launch_sleep(100000, b));
  OK(fooStreamDestroy(b));
  OK(fooStreamDestroy(a));
  EXPECT_CODE(fooStreamDestroy(nullptr), fooErrorInvalidResourceHandle);
  OK(fooDeviceSynchronize());
  OK(fooFree(counter));
  OK(fooFree(slots));
}

void record_order(void* data) {
  auto* order = static_cast<std::vector<int>*>(data);
  order->push_back(static_cast<int>(order->size()));
}

void test_launches() {
  // Arguments are checked.
  SleepParams sleep{0};
  EXPECT_CODE(fooLaunchKernel(nullptr, kOne, kOne, &sleep, sizeof(sleep), 0, nullptr), fooErrorInvalidValue);
  const fooDim3 empty{0, 1, 1};
  EXPECT_CODE(fooLaunchKernel(k().sleep, empty, kOne, &sleep, sizeof(sleep), 0, nullptr), fooErrorInvalidValue);
  EXPECT_CODE(fooLaunchKernel(k().sleep, kOne, empty, &sleep, sizeof(sleep), 0, nullptr), fooErrorInvalidValue);
  EXPECT_CODE(fooLaunchKernel(k().sleep, kOne, kOne, nullptr, 4, 0, nullptr), fooErrorInvalidValue);
  std::vector<char> huge(FOO_MAX_PARAM_BYTES + 1);
  EXPECT_CODE(fooLaunchKernel(k().sleep, kOne, kOne, huge.data(), huge.size(), 0, 0), fooErrorInvalidValue);
  fooDeviceProp prop;
  OK(fooGetDeviceProperties(&prop, 0));
  const fooDim3 too_big{static_cast<unsigned>(prop.maxThreadsPerBlock) + 1, 1, 1};
  EXPECT_CODE(fooLaunchKernel(k().sleep, kOne, too_big, &sleep, sizeof(sleep), 0, 0), fooErrorInvalidValue);
  const char* name = nullptr;
  OK(fooFuncGetName(&name, k().fill));
  EXPECT(name != nullptr && name[0] != '\0');
  // Every block of a grid runs (a 3-D grid over an odd size), and the arguments are copied at
  // launch: changing them afterwards changes nothing.
  const size_t n = 100003;
  unsigned char* data = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&data), n));
  OK(fooMemsetAsync(data, 0, n, nullptr));
  OK(launch_sleep(50000, nullptr));
  unsigned char nine = 9;
  size_t count = n;
  const fooKernelArg fill[] = {
      test_arg(fooKernelArgBuffer, data, 0),
      test_arg(fooKernelArgValue, &nine, sizeof(nine)),
      test_arg(fooKernelArgValue, &count, sizeof(count))};
  OK(fooLaunchKernelArgs(k().fill, fooDim3{7, 3, 2}, fooDim3{128, 1, 1}, fill, 3, nullptr));
  nine = 1;
  count = 1;
  OK(fooStreamSynchronize(nullptr));
  const auto filled = download<unsigned char>(data, n);
  size_t nines = 0;
  for (const unsigned char c : filled) {
    nines += c == 9;
  }
  EXPECT(nines == n);
  OK(fooFree(data));
  // Host functions run in stream order.
  std::vector<int> order;
  fooStream_t s = nullptr;
  OK(fooStreamCreate(&s));
  OK(launch_sleep(50000, s));
  for (int i = 0; i < 10; ++i) {
    OK(fooLaunchHostFunc(s, &record_order, &order));
  }
  EXPECT_CODE(fooStreamQuery(s), fooErrorNotReady);
  EXPECT_CODE(fooLaunchHostFunc(s, nullptr, nullptr), fooErrorInvalidValue);
  OK(fooStreamSynchronize(s));
  EXPECT(order.size() == 10 && order[9] == 9);
  OK(fooStreamDestroy(s));
  // Modules: a missing file is reported, not fatal.
  fooModule_t module = nullptr;
  EXPECT_CODE(fooModuleLoad(&module, "/nonexistent/module.bin"), fooErrorNotFound);
  EXPECT_CODE(fooModuleLoad(nullptr, "x"), fooErrorInvalidValue);
}

// Typed launches (fooLaunchKernelArgs): every kind of argument reaches the kernel, and every
// argument that breaks the rules is refused before anything runs.
void test_typed_launches() {
  int* counter = nullptr;
  int* slots = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counter), sizeof(int)));
  OK(fooMalloc(reinterpret_cast<void**>(&slots), 64 * sizeof(int)));
  OK(fooMemsetAsync(counter, 0, sizeof(int), nullptr));
  OK(fooMemsetAsync(slots, 0xff, 64 * sizeof(int), nullptr));
  // A Buffer anywhere inside an allocation: the kernel writes at that offset.
  OK(test_launch_stamp(counter, slots + 37, nullptr));
  OK(test_launch_stamp(counter, slots + 5, nullptr));
  OK(fooStreamSynchronize(nullptr));
  const auto stamped = download<int>(slots, 64);
  EXPECT(stamped[37] == 0 && stamped[5] == 1 && stamped[0] == -1 && stamped[36] == -1 && stamped[38] == -1);
  // Values at a Buffer's offset, over a grid: fill bytes [3, 3 + 1000) of a larger allocation.
  unsigned char* bytes = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&bytes), 1024));
  OK(fooMemsetAsync(bytes, 0, 1024, nullptr));
  OK(test_launch_fill(fooDim3{3, 1, 1}, kOne, bytes + 3, 0x5a, 1000, nullptr));
  OK(fooStreamSynchronize(nullptr));
  const auto filled = download<unsigned char>(bytes, 1024);
  size_t inside = 0;
  for (size_t i = 3; i < 1003; ++i) {
    inside += filled[i] == 0x5a;
  }
  EXPECT(inside == 1000 && filled[2] == 0 && filled[1003] == 0);
  // Local memory: two regions of the block's own, apart from each other.
  constexpr unsigned kSwap = 200;
  std::vector<int> values(kSwap);
  for (unsigned i = 0; i < kSwap; ++i) {
    values[i] = static_cast<int>(i) + 7;
  }
  int* data = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&data), kSwap * sizeof(int)));
  OK(fooMemcpy(data, values.data(), kSwap * sizeof(int), fooMemcpyHostToDevice));
  unsigned n = kSwap;
  const fooKernelArg swap[] = {
      test_arg(fooKernelArgBuffer, data, 0),
      test_arg(fooKernelArgValue, &n, sizeof(n)),
      test_arg(fooKernelArgLocal, nullptr, kSwap * sizeof(int)),
      test_arg(fooKernelArgLocal, nullptr, kSwap * sizeof(int))};
  OK(fooLaunchKernelArgs(k().swap, kOne, fooDim3{kSwap, 1, 1}, swap, 4, nullptr));
  OK(fooStreamSynchronize(nullptr));
  const auto swapped = download<int>(data, kSwap);
  bool all = true;
  for (unsigned i = 0; i < kSwap; ++i) {
    const unsigned j = kSwap - 1 - i;
    all = all && swapped[i] == values[j] * 1000 + static_cast<int>(j);
  }
  EXPECT(all);
  // An ErrorFlag raised by every block fails the launch once, with the launch's message (copied at
  // launch), at the next synchronisation; work after it still runs. One not raised fails nothing.
  char message[32];
  std::snprintf(message, sizeof(message), "bad input %d", 17);
  OK(test_launch_trap(fooDim3{8, 1, 1}, 1, message, nullptr));
  std::snprintf(message, sizeof(message), "overwritten");
  OK(test_launch_stamp(counter, slots, nullptr));
  EXPECT_CODE(fooStreamSynchronize(nullptr), fooErrorLaunchFailure);
  EXPECT(std::strstr(fooGetLastErrorMessage(), "bad input 17") != nullptr);
  OK(fooStreamSynchronize(nullptr));
  EXPECT(download<int>(slots, 1)[0] == 2);
  OK(test_launch_trap(fooDim3{8, 1, 1}, 0, "never raised", nullptr));
  OK(fooStreamSynchronize(nullptr));

  // The entry point's checks: each is fooErrorInvalidValue.
  int word = 0;
  const fooKernelArg good = test_arg(fooKernelArgValue, &word, sizeof(word));
  const auto launch = [](const fooKernelArg* args, unsigned nargs) {
    return fooLaunchKernelArgs(k().sleep, kOne, kOne, args, nargs, nullptr);
  };
  EXPECT_CODE(launch(nullptr, 1), fooErrorInvalidValue);
  std::vector<fooKernelArg> many(FOO_MAX_KERNEL_ARGS + 1, test_arg(fooKernelArgBuffer, data, 0));
  EXPECT_CODE(launch(many.data(), FOO_MAX_KERNEL_ARGS + 1), fooErrorInvalidValue);
  const fooKernelArg bad_kind = test_arg(static_cast<fooKernelArgKind>(9), &word, sizeof(word));
  EXPECT_CODE(launch(&bad_kind, 1), fooErrorInvalidValue);
  const fooKernelArg bad[] = {
      test_arg(fooKernelArgValue, nullptr, 4), // a Value without bytes
      test_arg(fooKernelArgValue, &word, 0),
      test_arg(fooKernelArgBuffer, data, 8), // a Buffer with a size
      test_arg(fooKernelArgBuffer, nullptr, 0),
      test_arg(fooKernelArgErrorFlag, nullptr, 0), // an ErrorFlag without a message
      test_arg(fooKernelArgErrorFlag, "message", 1),
      test_arg(fooKernelArgLocal, nullptr, 0), // a Local of no bytes
  };
  for (const fooKernelArg& arg : bad) {
    const fooKernelArg args[] = {good, arg};
    EXPECT_CODE(launch(args, 2), fooErrorInvalidValue);
  }
  std::vector<char> half(FOO_MAX_PARAM_BYTES / 2 + 1);
  const fooKernelArg too_many_bytes[] = {
      test_arg(fooKernelArgValue, half.data(), half.size()),
      test_arg(fooKernelArgValue, half.data(), half.size()),
  };
  EXPECT_CODE(launch(too_many_bytes, 2), fooErrorInvalidValue);
  fooDeviceProp prop;
  OK(fooGetDeviceProperties(&prop, 0));
  const fooKernelArg too_much_local[] = {
      test_arg(fooKernelArgLocal, nullptr, prop.sharedMemPerBlock / 2 + 16),
      test_arg(fooKernelArgLocal, nullptr, prop.sharedMemPerBlock / 2 + 16)};
  EXPECT_CODE(launch(too_much_local, 2), fooErrorInvalidValue);
  OK(launch(&good, 1));
  // A Buffer that is not device memory of the stream's device: host memory, a freed allocation,
  // another device's memory.
  const auto stamp_at = [&](void* slot) {
    const fooKernelArg args[] = {
        test_arg(fooKernelArgBuffer, counter, 0),
        test_arg(fooKernelArgBuffer, slot, 0),
    };
    return fooLaunchKernelArgs(k().stamp, kOne, kOne, args, 2, nullptr);
  };
  EXPECT_CODE(stamp_at(&word), fooErrorInvalidDevicePointer);
  int* freed = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&freed), 4096));
  OK(fooFree(freed));
  EXPECT_CODE(stamp_at(freed), fooErrorInvalidDevicePointer);
  int count = 0;
  OK(fooGetDeviceCount(&count));
  if (count > 1) {
    OK(fooSetDevice(1));
    void* elsewhere = nullptr;
    OK(fooMalloc(&elsewhere, 64));
    OK(fooSetDevice(0));
    EXPECT_CODE(stamp_at(elsewhere), fooErrorInvalidDevicePointer);
    OK(fooFree(elsewhere));
  }
  OK(fooStreamSynchronize(nullptr));
  EXPECT(download<int>(slots, 1)[0] == 2); // none of the refused launches ran
  OK(fooFree(counter));
  OK(fooFree(slots));
  OK(fooFree(bytes));
  OK(fooFree(data));
}

// Modules from memory (fooModuleLoadData): the test module from its source and from its binary,
// each runs; source that does not build is fooErrorInvalidKernelImage with the compiler's message.
void test_modules_from_memory() {
  constexpr unsigned kCount = 1000;
  int* data = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&data), kCount * sizeof(int)));
  OK(fooMemsetAsync(data, 0, kCount * sizeof(int), nullptr));
  int added = 0;
  for (const TestModuleImage& image : {test_module_source(), test_module_binary()}) {
    fooModule_t module = nullptr;
    OK(fooModuleLoadData(&module, image.data, image.size, image.format, image.options));
    fooFunction_t add = nullptr;
    OK(fooModuleGetFunction(&add, module, "test_add"));
    EXPECT_CODE(fooModuleGetFunction(&add, module, "no_such_kernel"), fooErrorNotFound);
    int value = image.format == fooModuleSource ? 3 : 40;
    unsigned count = kCount;
    const fooKernelArg args[] = {
        test_arg(fooKernelArgBuffer, data, 0),
        test_arg(fooKernelArgValue, &value, sizeof(value)),
        test_arg(fooKernelArgValue, &count, sizeof(count))};
    OK(fooLaunchKernelArgs(add, fooDim3{5, 1, 1}, fooDim3{64, 1, 1}, args, 3, nullptr));
    added += value;
    OK(fooStreamSynchronize(nullptr));
    OK(fooModuleUnload(module));
  }
  const auto sums = download<int>(data, kCount);
  EXPECT(sums[0] == added && sums[kCount - 1] == added && added == 43);
  const TestModuleImage broken = test_module_broken_source();
  fooModule_t module = nullptr;
  const auto status = fooModuleLoadData(&module, broken.data, broken.size, broken.format, broken.options);
  EXPECT_CODE(status, fooErrorInvalidKernelImage);
  EXPECT(std::strstr(fooGetLastErrorMessage(), "undeclared_in_test_module") != nullptr);
  const char junk[] = "not a module";
  const auto junk_status = fooModuleLoadData(&module, junk, sizeof(junk), fooModuleBinary, nullptr);
  EXPECT_CODE(junk_status, fooErrorInvalidKernelImage);
  // The entry point's checks.
  const TestModuleImage source = test_module_source();
  const auto without_module = fooModuleLoadData(nullptr, source.data, source.size, source.format, nullptr);
  EXPECT_CODE(without_module, fooErrorInvalidValue);
  EXPECT_CODE(fooModuleLoadData(&module, nullptr, source.size, source.format, nullptr), fooErrorInvalidValue);
  EXPECT_CODE(fooModuleLoadData(&module, source.data, 0, source.format, nullptr), fooErrorInvalidValue);
  const auto bad_format = static_cast<fooModuleFormat>(7);
  EXPECT_CODE(fooModuleLoadData(&module, source.data, source.size, bad_format, nullptr), fooErrorInvalidValue);
  OK(fooFree(data));
}

// Native handles, and vendor-library work (fooLaunchNative) in order with the stream's other work.
void test_native_work() {
  void* native = nullptr;
  void* context = nullptr;
  const fooError_t handled = fooDeviceGetNativeHandle(0, &native, &context);
  EXPECT(handled == fooSuccess || handled == fooErrorNotSupported);
  EXPECT(handled != fooSuccess || (native != nullptr && context != nullptr));
  int count = 0;
  OK(fooGetDeviceCount(&count));
  EXPECT_CODE(fooDeviceGetNativeHandle(count, &native, &context), fooErrorInvalidDevice);
  EXPECT_CODE(fooDeviceGetNativeHandle(0, nullptr, &context), fooErrorInvalidValue);
  EXPECT_CODE(fooDeviceGetNativeHandle(0, &native, nullptr), fooErrorInvalidValue);
  // A device address maps to its buffer and offset: two addresses of one allocation share the
  // buffer, their offsets differ by their distance.
  int* counter = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counter), 8 * sizeof(int)));
  TestNativeStamp stamp{};
  OK(fooPointerGetNativeHandle(counter, &stamp.counter_buffer, &stamp.counter_offset));
  OK(fooPointerGetNativeHandle(counter + 5, &stamp.slot_buffer, &stamp.slot_offset));
  EXPECT(stamp.counter_buffer != nullptr && stamp.slot_buffer == stamp.counter_buffer);
  EXPECT(stamp.slot_offset == stamp.counter_offset + 5 * sizeof(int));
  int host = 0;
  void* buffer = nullptr;
  size_t offset = 0;
  EXPECT_CODE(fooPointerGetNativeHandle(&host, &buffer, &offset), fooErrorInvalidDevicePointer);
  EXPECT_CODE(fooPointerGetNativeHandle(counter, nullptr, &offset), fooErrorInvalidValue);
  EXPECT_CODE(fooPointerGetNativeHandle(counter, &buffer, nullptr), fooErrorInvalidValue);
  // In order: a kernel, the native work, a kernel, all behind a sleep; the native work's
  // arguments are copied at the call.
  fooStream_t s = nullptr;
  OK(fooStreamCreate(&s));
  OK(fooMemsetAsync(counter, 0, 8 * sizeof(int), s));
  OK(launch_sleep(50000, s));
  OK(launch_stamp(counter, counter + 4, s));
  OK(fooLaunchNative(s, "test native stamp", &test_native_stamp, &stamp, sizeof(stamp)));
  stamp.slot_offset = stamp.counter_offset;
  OK(launch_stamp(counter, counter + 6, s));
  EXPECT_CODE(fooStreamQuery(s), fooErrorNotReady);
  OK(fooStreamSynchronize(s));
  const auto order = download<int>(counter, 8);
  EXPECT(order[0] == 3 && order[4] == 0 && order[5] == 1 && order[6] == 2);
  // The entry point's checks.
  EXPECT_CODE(fooLaunchNative(s, "x", nullptr, &stamp, sizeof(stamp)), fooErrorInvalidValue);
  EXPECT_CODE(fooLaunchNative(s, nullptr, &test_native_stamp, &stamp, sizeof(stamp)), fooErrorInvalidValue);
  EXPECT_CODE(fooLaunchNative(s, "x", &test_native_stamp, nullptr, sizeof(stamp)), fooErrorInvalidValue);
  OK(fooStreamDestroy(s));
  const auto destroyed = fooLaunchNative(s, "x", &test_native_stamp, &stamp, sizeof(stamp));
  EXPECT_CODE(destroyed, fooErrorInvalidResourceHandle);
  OK(fooFree(counter));
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
  EXPECT_CODE(fooEventCreateWithFlags(&plain, 0x80), fooErrorInvalidValue);
  OK(fooEventQuery(plain)); // never recorded
  OK(fooEventRecord(start, producer));
  OK(launch_sleep(50000, producer));
  OK(fooEventRecord(end, producer));
  OK(fooEventRecord(plain, producer));
  EXPECT_CODE(fooEventQuery(end), fooErrorNotReady);
  float elapsed = 0;
  EXPECT_CODE(fooEventElapsedTime(&elapsed, start, end), fooErrorNotReady);
  // The consumer waits for the producer's event (after the first sleep), not for later work.
  int* counter = nullptr;
  int* slots = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counter), sizeof(int)));
  OK(fooMalloc(reinterpret_cast<void**>(&slots), 2 * sizeof(int)));
  OK(fooMemsetAsync(counter, 0, sizeof(int), producer));
  OK(fooStreamSynchronize(producer));
  OK(launch_sleep(50000, producer));
  OK(fooEventRecord(plain, producer));
  OK(fooStreamWaitEvent(consumer, plain, 0));
  OK(launch_stamp(counter, slots + 0, consumer)); // runs after the first sleep ...
  OK(launch_sleep(200000, producer));
  OK(launch_stamp(counter, slots + 1, producer)); // ... this one after the second
  EXPECT_CODE(fooStreamWaitEvent(consumer, plain, 1), fooErrorInvalidValue);
  EXPECT_CODE(fooStreamQuery(consumer), fooErrorNotReady);
  OK(fooStreamSynchronize(consumer));
  EXPECT_CODE(fooStreamQuery(producer), fooErrorNotReady);
  OK(fooStreamSynchronize(producer));
  const auto order = download<int>(slots, 2);
  EXPECT(order[0] == 0 && order[1] == 1);
  OK(fooEventSynchronize(end));
  OK(fooEventElapsedTime(&elapsed, start, end));
  EXPECT(elapsed >= 49.0f && elapsed < 60000.0f);
  EXPECT_CODE(fooEventElapsedTime(&elapsed, start, plain), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooEventElapsedTime(nullptr, start, end), fooErrorInvalidValue);
  // An event belongs to its device.
  int count = 0;
  OK(fooGetDeviceCount(&count));
  if (count > 1) {
    OK(fooSetDevice(1));
    fooStream_t other = nullptr;
    OK(fooStreamCreate(&other));
    EXPECT_CODE(fooEventRecord(start, other), fooErrorInvalidResourceHandle);
    OK(fooStreamDestroy(other));
    OK(fooSetDevice(0));
  }
  OK(fooEventDestroy(start));
  OK(fooEventDestroy(end));
  OK(fooEventDestroy(plain));
  OK(fooStreamDestroy(producer));
  OK(fooStreamDestroy(consumer));
  OK(fooFree(counter));
  OK(fooFree(slots));
}

// A handle names one object for that object's life: once it is destroyed, the handle is refused
// (fooErrorInvalidResourceHandle) by every call, a second destroy included, and stays refused
// after new objects were created, which a driver may place where the old one was. The driver checks
// a handle without reading memory through it, so none of this reads freed memory (the sanitized
// build checks that). A handle of one kind is no handle of another.
void test_stale_handles() {
  for (int round = 0; round < 2; ++round) { // create, destroy, create and destroy again
    fooStream_t stream = nullptr;
    fooEvent_t event = nullptr;
    OK(fooStreamCreate(&stream));
    OK(fooEventCreate(&event));
    OK(fooEventRecord(event, stream));
    OK(fooEventSynchronize(event));
    OK(fooEventDestroy(event));
    OK(fooStreamDestroy(stream));
    EXPECT_CODE(fooStreamDestroy(stream), fooErrorInvalidResourceHandle);
    EXPECT_CODE(fooEventDestroy(event), fooErrorInvalidResourceHandle);
  }
  // Stale handles among live objects: each call refuses the old handle and accepts the new one.
  fooStream_t old_stream = nullptr;
  fooEvent_t old_event = nullptr;
  OK(fooStreamCreate(&old_stream));
  OK(fooEventCreate(&old_event));
  OK(fooEventDestroy(old_event));
  OK(fooStreamDestroy(old_stream));
  std::vector<fooStream_t> streams(4);
  std::vector<fooEvent_t> events(4);
  for (size_t i = 0; i < streams.size(); ++i) {
    OK(fooStreamCreate(&streams[i]));
    OK(fooEventCreate(&events[i]));
    EXPECT(streams[i] != old_stream && events[i] != old_event);
  }
  int device = -1;
  int priority = 0;
  EXPECT_CODE(fooStreamQuery(old_stream), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooStreamSynchronize(old_stream), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooStreamGetDevice(old_stream, &device), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooStreamGetPriority(old_stream, &priority), fooErrorInvalidResourceHandle);
  EXPECT_CODE(launch_sleep(0, old_stream), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooEventRecord(old_event, streams[0]), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooEventRecord(events[0], old_stream), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooEventQuery(old_event), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooStreamWaitEvent(streams[0], old_event, 0), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooStreamDestroy(old_stream), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooEventDestroy(old_event), fooErrorInvalidResourceHandle);
  // A handle of another kind.
  EXPECT_CODE(fooEventQuery(reinterpret_cast<fooEvent_t>(streams[0])), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooStreamQuery(reinterpret_cast<fooStream_t>(events[0])), fooErrorInvalidResourceHandle);
  for (size_t i = 0; i < streams.size(); ++i) {
    OK(launch_sleep(0, streams[i]));
    OK(fooEventRecord(events[i], streams[i]));
    OK(fooStreamWaitEvent(streams[0], events[i], 0));
    OK(fooStreamGetDevice(streams[i], &device));
  }
  OK(fooStreamSynchronize(streams[0]));
  for (size_t i = 0; i < streams.size(); ++i) {
    OK(fooEventDestroy(events[i]));
    OK(fooStreamDestroy(streams[i]));
  }
  // Handles made and checked from several threads at once.
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        fooEvent_t e = nullptr;
        const bool ok = fooEventCreate(&e) == fooSuccess && fooEventQuery(e) == fooSuccess &&
            fooEventDestroy(e) == fooSuccess && fooEventQuery(e) == fooErrorInvalidResourceHandle;
        wrong += ok ? 0 : 1;
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT(wrong.load() == 0);
}

// Copies between devices, and streams of several devices used from several host threads.
void test_devices_and_threads() {
  int count = 0;
  OK(fooGetDeviceCount(&count));
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, count, &errors] {
      const int device = t % count;
      if (fooSetDevice(device) != fooSuccess) {
        ++errors;
        return;
      }
      fooStream_t s = nullptr;
      unsigned char* data = nullptr;
      const size_t n = 1 << 16;
      const bool created = fooStreamCreate(&s) == fooSuccess;
      if (!created || fooMalloc(reinterpret_cast<void**>(&data), n) != fooSuccess) {
        ++errors;
        return;
      }
      for (int round = 0; round < 20; ++round) {
        const auto value = static_cast<unsigned char>(round);
        if (test_launch_fill(fooDim3{4, 1, 1}, kOne, data, value, n, s) != fooSuccess) {
          ++errors;
        }
      }
      std::vector<unsigned char> host(n);
      const fooError_t copied = fooMemcpyAsync(host.data(), data, n, fooMemcpyDeviceToHost, s);
      if (copied != fooSuccess || host[n - 1] != 19) {
        ++errors;
      }
      fooPointerAttributes a;
      if (fooPointerGetAttributes(&a, data) != fooSuccess || a.device != device) {
        ++errors;
      }
      fooStreamDestroy(s);
      fooFree(data);
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT(errors.load() == 0);
  if (count > 1) {
    void* on0 = nullptr;
    void* on1 = nullptr;
    OK(fooMalloc(&on0, 64));
    OK(fooSetDevice(1));
    OK(fooMalloc(&on1, 64));
    OK(fooSetDevice(0));
    OK(fooMemsetAsync(on0, 6, 64, nullptr));
    OK(fooStreamSynchronize(nullptr));
    OK(fooMemcpy(on1, on0, 64, fooMemcpyDeviceToDevice));
    EXPECT(download<char>(on1, 64)[63] == 6);
    OK(fooFree(on0));
    OK(fooFree(on1));
  }
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
    const bool explained = std::strstr(fooGetLastErrorMessage(), "spawn") != nullptr;
    const bool counted = fooGetDeviceCount(&count) == fooSuccess && count >= 1;
    _exit(marked && refused && refused_too && explained && counted ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

} // namespace

void test_tracing(); // tracing_contract.cpp

int main() {
  test_lazy_initialisation();
  test_errors_and_versions();
  test_devices();
  test_memory();
  test_pinned_memory();
  test_pageable_copies_may_reuse_the_memory_at_once();
  test_streams();
  test_launches();
  test_typed_launches();
  test_modules_from_memory();
  test_native_work();
  test_events();
  test_stale_handles();
  test_devices_and_threads();
  test_peer_access_and_foreign_handles();
  test_tracing();
  for (const Check check : registered_checks()) { // the contract files of the project's features
    check();
  }
  test_fork();
  return finish("runtime contract");
}

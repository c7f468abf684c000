// The emulated device's own behaviour, beyond the contract (contract_test.cpp): the environment
// variables, strict memory mode, kernels as host functions (emulation.h) and modules as shared
// libraries. tests/test_runtime.py runs it in several configurations. A hardware port deletes it.
//
//   emulation_test                      the checks below
//   emulation_test --module PATH        also load PATH, a shared library with kernels `add_one` and
//                                       `count_blocks`, and leave it loaded at exit
//   emulation_test --touch-from-host    dereference device memory on the host (must crash in strict mode)
//   emulation_test --touch-from-kernel  dereference it in a kernel without ctx->address (must crash too)
//   emulation_test --exit-while-busy    return from main() while other threads keep using the runtime
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "../../csrc/runtime/emulation.h"
#include "check.h"

namespace {

const fooDim3 kOne{1, 1, 1};

bool strict() {
  const char* env = std::getenv("FOO_STRICT_MEMORY");
  return env != nullptr && env[0] != '\0' && std::strcmp(env, "0") != 0;
}

// Records where the kernel sees a device pointer and a host pointer.
struct AddressParams {
  void* device;
  void* host;
  void* seen_device; // host memory: the kernel writes its observations here
};

void address_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const AddressParams*>(params);
  auto* seen = static_cast<void**>(p->seen_device);
  seen[0] = ctx->address(p->device);
  seen[1] = ctx->address(p->host);
}

// A parameter block larger than what travels inside a queued task.
struct BigParams {
  int values[250];
  int* out;
};

void sum_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const BigParams*>(params);
  int sum = 0;
  for (const int v : p->values) {
    sum += v;
  }
  *static_cast<int*>(ctx->address(p->out)) = sum;
}

// Calls that would wait for the kernel's own stream, from inside it (results go to host memory).
struct RuntimeCallParams {
  void* device;
  fooError_t* results;
};

void runtime_calls_in_kernel(const fooEmuKernelContext*, const void* params) {
  const auto* p = static_cast<const RuntimeCallParams*>(params);
  p->results[0] = fooFree(p->device);
  p->results[1] = fooStreamSynchronize(nullptr);
  p->results[2] = fooDeviceSynchronize();
}

// The parameter block of a typed launch (emulation.h): the arguments in order, a Value aligned as
// a C object of its size, the other kinds 8-byte slots; as this struct lays them out.
struct LayoutParams {
  char c; // Value, 1 byte
  double d; // Value, 8 bytes: at 8
  short h; // Value, 2 bytes: at 16
  void* buffer; // Buffer: at 24
  char three[3]; // Value, 3 bytes: at 32
  const char* error; // ErrorFlag: at 40
  size_t first; // Local of 20 bytes: offset 0
  int i; // Value, 4 bytes: at 56
  size_t second; // Local of 8 bytes: offset 32 (20 rounded up to 16)
};

struct LayoutSeen {
  LayoutParams block; // what the kernel received
  bool shared; // whether ctx->sharedMem held both Local regions
};

// Copies its parameter block (and the shared memory check) to the host memory at `seen`, whose
// address travels as the last Value (a host pointer: ctx->address leaves it unchanged).
void layout_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const LayoutParams*>(params);
  LayoutSeen* seen = nullptr;
  std::memcpy(&seen, static_cast<const char*>(params) + sizeof(LayoutParams), sizeof(seen));
  std::memcpy(&seen->block, p, sizeof(LayoutParams));
  auto* shared = static_cast<char*>(ctx->sharedMem);
  seen->shared = shared != nullptr;
  if (shared != nullptr) {
    std::memset(shared + p->first, 1, 20); // both regions are writable, apart
    std::memset(shared + p->second, 2, 8);
    seen->shared = shared[p->first + 19] == 1 && shared[p->second] == 2;
  }
}

// fooLaunchKernel's block arrives as passed, with its shared memory at ctx->sharedMem.
struct BlockSeen {
  int value;
  void* shared;
};

void block_kernel(const fooEmuKernelContext* ctx, const void* params) {
  BlockSeen* seen = nullptr;
  std::memcpy(&seen, params, sizeof(seen));
  seen->value = *reinterpret_cast<const int*>(static_cast<const char*>(params) + sizeof(seen));
  seen->shared = ctx->sharedMem;
}

// Native work: where it runs, and with what.
struct NativeSeen {
  void* queue = reinterpret_cast<void*>(1);
  std::thread::id thread;
  int value = 0;
};

void native_probe(void* queue, const void* args) {
  NativeSeen* seen = nullptr;
  std::memcpy(&seen, args, sizeof(seen));
  seen->queue = queue;
  seen->thread = std::this_thread::get_id();
  std::memcpy(&seen->value, static_cast<const char*>(args) + sizeof(seen), sizeof(int));
}

void synchronize_in_host_function(void* data) {
  *static_cast<fooError_t*>(data) = fooStreamSynchronize(nullptr);
}

void careless_kernel(const fooEmuKernelContext*, const void* params) {
  volatile char* p = *static_cast<char* const*>(params);
  p[0] = 1; // no ctx->address: crashes in strict mode
}

struct FillParams {
  int* data;
  int value;
  int count;
};

void fill_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const FillParams*>(params);
  auto* data = static_cast<int*>(ctx->address(p->data));
  std::fill(data, data + p->count, p->value);
}

std::atomic<long> busy_rounds{0};

// One thread's endless round of device work: allocate, launch, record, copy back, free.
void keep_busy(int device, fooFunction_t fill) {
  (void)fooSetDevice(device);
  fooStream_t stream = nullptr;
  fooEvent_t event = nullptr;
  if (fooStreamCreate(&stream) != fooSuccess || fooEventCreate(&event) != fooSuccess) {
    return;
  }
  constexpr int kCount = 4096;
  std::vector<int> host(kCount);
  for (;;) {
    void* data = nullptr;
    if (fooMalloc(&data, kCount * sizeof(int)) != fooSuccess) {
      continue;
    }
    FillParams params{static_cast<int*>(data), device + 1, kCount};
    (void)fooLaunchKernel(fill, kOne, kOne, &params, sizeof(params), 0, stream);
    (void)fooEventRecord(event, stream);
    (void)fooMemcpyAsync(host.data(), data, kCount * sizeof(int), fooMemcpyDeviceToHost, stream);
    (void)fooEventSynchronize(event);
    (void)fooFree(data);
    busy_rounds.fetch_add(1);
  }
}

// Exit with work in flight: threads that never stop using the runtime, and main() returns while
// they run. The process must exit cleanly: exit drains and stops the stream workers, and the
// runtime's own state outlives C++ static destruction (other threads still call into it).
int exit_while_busy() {
  int devices = 0;
  OK(fooGetDeviceCount(&devices));
  fooFunction_t fill = nullptr;
  OK(fooEmuFunctionCreate(&fill, "fill", &fill_kernel));
  for (int t = 0; t < 4; ++t) {
    std::thread(&keep_busy, t % std::max(devices, 1), fill).detach();
  }
  while (busy_rounds.load() < 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("exiting with %ld rounds done\n", busy_rounds.load());
  std::fflush(stdout);
  return failures;
}

void test_configuration() {
  int count = 0;
  OK(fooGetDeviceCount(&count));
  if (const char* env = std::getenv("EXPECT_DEVICE_COUNT")) {
    EXPECT(count == std::atoi(env));
  }
  if (const char* env = std::getenv("EXPECT_DEVICE_MEMORY")) {
    fooDeviceProp prop;
    OK(fooGetDeviceProperties(&prop, 0));
    EXPECT(prop.totalGlobalMem == std::strtoull(env, nullptr, 10));
  }
}

void test_kernels() {
  fooFunction_t address = nullptr;
  OK(fooEmuFunctionCreate(&address, "address", &address_kernel));
  EXPECT_CODE(fooEmuFunctionCreate(nullptr, "x", &address_kernel), fooErrorInvalidValue);
  EXPECT_CODE(fooEmuFunctionCreate(&address, "x", nullptr), fooErrorInvalidValue);
  void* device = nullptr;
  OK(fooMalloc(&device, 64));
  int host = 0;
  void* seen[2] = {nullptr, nullptr};
  AddressParams params{device, &host, seen};
  OK(fooLaunchKernel(address, kOne, kOne, &params, sizeof(params), 0, nullptr));
  OK(fooStreamSynchronize(nullptr));
  EXPECT(seen[1] == &host); // host pointers are not translated
  EXPECT(strict() ? seen[0] != device : seen[0] == device);

  fooFunction_t sum = nullptr;
  OK(fooEmuFunctionCreate(&sum, "sum", &sum_kernel));
  BigParams big{};
  int expected = 0;
  for (int i = 0; i < 250; ++i) {
    big.values[i] = i;
    expected += i;
  }
  big.out = static_cast<int*>(device);
  OK(fooLaunchKernel(sum, kOne, kOne, &big, sizeof(big), 0, nullptr));
  OK(fooStreamSynchronize(nullptr));
  int result = 0;
  OK(fooMemcpy(&result, device, sizeof(int), fooMemcpyDeviceToHost));
  EXPECT(result == expected);

  // Work running on a stream must not call the runtime; where it would wait for itself, the
  // emulation says so instead of hanging.
  fooError_t inner = fooSuccess;
  OK(fooLaunchHostFunc(nullptr, &synchronize_in_host_function, &inner));
  OK(fooDeviceSynchronize());
  EXPECT(inner == fooErrorNotPermitted);
  fooFunction_t calls = nullptr;
  OK(fooEmuFunctionCreate(&calls, "runtime_calls_in_kernel", &runtime_calls_in_kernel));
  fooError_t results[3];
  std::fill(std::begin(results), std::end(results), fooSuccess);
  RuntimeCallParams call_params{device, results};
  OK(fooLaunchKernel(calls, kOne, kOne, &call_params, sizeof(call_params), 0, nullptr));
  OK(fooDeviceSynchronize());
  EXPECT(results[0] == fooErrorNotPermitted);
  EXPECT(results[1] == fooErrorNotPermitted);
  EXPECT(results[2] == fooErrorNotPermitted);
  OK(fooFree(device));
}

fooKernelArg arg(fooKernelArgKind kind, const void* pointer, size_t size) {
  fooKernelArg a;
  a.kind = kind;
  a.pointer = pointer;
  a.size = size;
  return a;
}

// The emulated device's side of the seam, version 2: the typed parameter block, native handles and
// work, and modules built by the host compiler.
void test_seam() {
  fooFunction_t layout = nullptr;
  OK(fooEmuFunctionCreate(&layout, "layout", &layout_kernel));
  void* device = nullptr;
  OK(fooMalloc(&device, 256));
  LayoutSeen seen{};
  LayoutSeen* where = &seen;
  const char c = 'c';
  const double d = 2.5;
  const short h = -3;
  const char three[3] = {'x', 'y', 'z'};
  const int i = 77;
  char* inside = static_cast<char*>(device) + 100;
  const fooKernelArg args[] = {
      arg(fooKernelArgValue, &c, 1),
      arg(fooKernelArgValue, &d, 8),
      arg(fooKernelArgValue, &h, 2),
      arg(fooKernelArgBuffer, inside, 0),
      arg(fooKernelArgValue, three, 3),
      arg(fooKernelArgErrorFlag, "flag message", 0),
      arg(fooKernelArgLocal, nullptr, 20),
      arg(fooKernelArgValue, &i, 4),
      arg(fooKernelArgLocal, nullptr, 8),
      arg(fooKernelArgValue, &where, sizeof(where))};
  static_assert(sizeof(LayoutParams) == 72, "the layout this test expects");
  OK(fooLaunchKernelArgs(layout, kOne, kOne, args, 10, nullptr));
  OK(fooStreamSynchronize(nullptr));
  EXPECT(seen.block.c == 'c' && seen.block.d == 2.5 && seen.block.h == -3 && seen.block.buffer == inside);
  EXPECT(std::memcmp(seen.block.three, "xyz", 3) == 0 && seen.block.i == 77);
  EXPECT(seen.block.error != nullptr && std::strcmp(seen.block.error, "flag message") == 0);
  EXPECT(seen.block.first == 0 && seen.block.second == 32 && seen.shared);

  fooFunction_t block = nullptr;
  OK(fooEmuFunctionCreate(&block, "block", &block_kernel));
  BlockSeen block_seen{0, nullptr};
  struct {
    BlockSeen* seen;
    int value;
  } old_block{&block_seen, 5};
  OK(fooLaunchKernel(block, kOne, kOne, &old_block, sizeof(old_block), 100, nullptr));
  OK(fooStreamSynchronize(nullptr));
  EXPECT(block_seen.value == 5 && block_seen.shared != nullptr);
  OK(fooLaunchKernel(block, kOne, kOne, &old_block, sizeof(old_block), 0, nullptr));
  OK(fooStreamSynchronize(nullptr));
  EXPECT(block_seen.shared == nullptr);

  // No vendor API behind the device; a device address is its allocation and the offset there.
  void* native = nullptr;
  void* context = nullptr;
  EXPECT_CODE(fooDeviceGetNativeHandle(0, &native, &context), fooErrorNotSupported);
  void* buffer = nullptr;
  size_t offset = 0;
  OK(fooPointerGetNativeHandle(inside, &buffer, &offset));
  EXPECT(buffer == device && offset == 100);
  EXPECT(fooEmuAddress(inside) == static_cast<char*>(fooEmuAddress(device)) + 100);

  // Native work runs on the stream's worker, with no queue and a copy of its arguments.
  NativeSeen native_seen;
  struct {
    NativeSeen* seen;
    int value;
  } native_args{&native_seen, 9};
  OK(fooLaunchNative(nullptr, "probe", &native_probe, &native_args, sizeof(native_args)));
  native_args.value = 10;
  OK(fooStreamSynchronize(nullptr));
  EXPECT(native_seen.queue == nullptr && native_seen.value == 9);
  EXPECT(native_seen.thread != std::thread::id() && native_seen.thread != std::this_thread::get_id());

  // Modules from source use $CXX: a compiler that does not exist is reported, not fatal.
  const char* cxx = std::getenv("CXX");
  const std::string saved = cxx != nullptr ? cxx : "";
  setenv("CXX", "/nonexistent/c++", 1);
  const char source[] = "extern \"C\" void k(const void*, const void*) {}\n";
  fooModule_t module = nullptr;
  const auto status = fooModuleLoadData(&module, source, sizeof(source) - 1, fooModuleSource, nullptr);
  EXPECT_CODE(status, fooErrorInvalidKernelImage);
  EXPECT(std::strstr(fooGetLastErrorMessage(), "/nonexistent/c++") != nullptr);
  if (cxx != nullptr) {
    setenv("CXX", saved.c_str(), 1);
  } else {
    unsetenv("CXX");
  }
  // Options reach the compiler: a macro the source needs.
  const char needs_macro[] = "#ifndef NEEDED\n#error NEEDED is not defined\n#endif\nextern \"C\" void k() {}\n";
  EXPECT_CODE(
      fooModuleLoadData(&module, needs_macro, sizeof(needs_macro) - 1, fooModuleSource, nullptr),
      fooErrorInvalidKernelImage);
  EXPECT(std::strstr(fooGetLastErrorMessage(), "NEEDED is not defined") != nullptr);
  OK(fooModuleLoadData(&module, needs_macro, sizeof(needs_macro) - 1, fooModuleSource, "-DNEEDED=1 -O0"));
  fooFunction_t k = nullptr;
  OK(fooModuleGetFunction(&k, module, "k"));
  OK(fooModuleUnload(module));
  OK(fooFree(device));
}

void test_module(const char* path) {
  fooModule_t module = nullptr;
  OK(fooModuleLoad(&module, path));
  fooFunction_t add_one = nullptr;
  OK(fooModuleGetFunction(&add_one, module, "add_one"));
  EXPECT_CODE(fooModuleGetFunction(&add_one, module, "no_such_kernel"), fooErrorNotFound);
  OK(fooModuleGetFunction(&add_one, module, "add_one"));
  const char* name = nullptr;
  OK(fooFuncGetName(&name, add_one));
  EXPECT(std::strcmp(name, "add_one") == 0);
  constexpr int n = 1000;
  std::vector<int> host(n, 41);
  int* device = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&device), n * sizeof(int)));
  OK(fooMemcpy(device, host.data(), n * sizeof(int), fooMemcpyHostToDevice));
  struct {
    int* data;
    long n;
  } params{device, n};
  OK(fooLaunchKernel(add_one, fooDim3{4, 1, 1}, kOne, &params, sizeof(params), 0, nullptr));
  OK(fooStreamSynchronize(nullptr));
  OK(fooMemcpy(host.data(), device, n * sizeof(int), fooMemcpyDeviceToHost));
  EXPECT(host[0] == 42 && host[n - 1] == 42);
  OK(fooModuleUnload(module));
  const fooError_t stale = fooLaunchKernel(add_one, kOne, kOne, &params, sizeof(params), 0, nullptr);
  EXPECT(stale == fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooModuleUnload(module), fooErrorInvalidResourceHandle);
  // Loaded again: new handles, which work, while the old ones stay refused (runtime.h, handles).
  fooModule_t again = nullptr;
  OK(fooModuleLoad(&again, path));
  fooFunction_t add_one_again = nullptr;
  OK(fooModuleGetFunction(&add_one_again, again, "add_one"));
  EXPECT(again != module && add_one_again != add_one);
  EXPECT_CODE(fooModuleGetFunction(&add_one, module, "add_one"), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooFuncGetName(&name, add_one), fooErrorInvalidResourceHandle);
  const fooError_t stale_again = fooLaunchKernel(add_one, kOne, kOne, &params, sizeof(params), 0, nullptr);
  EXPECT(stale_again == fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooModuleUnload(module), fooErrorInvalidResourceHandle);
  OK(fooLaunchKernel(add_one_again, fooDim3{4, 1, 1}, kOne, &params, sizeof(params), 0, nullptr));
  OK(fooStreamSynchronize(nullptr));
  OK(fooMemcpy(host.data(), device, n * sizeof(int), fooMemcpyDeviceToHost));
  EXPECT(host[0] == 43 && host[n - 1] == 43);
  OK(fooModuleUnload(again));
  EXPECT_CODE(fooModuleUnload(again), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooFuncGetName(&name, add_one_again), fooErrorInvalidResourceHandle);
  OK(fooFree(device));
}

// A module the program never unloads, whose kernel keeps per-thread state (a thread_local, dynamic
// TLS in a module loaded with dlopen), run on several streams: when the program exits, the
// streams' threads still hold that state and the module is still loaded. Both are the runtime's,
// not leaked; under the sanitizers the leak check at exit scans them (tests/sanitizers/harness.py,
// intercept_tls_get_addr). A thread of its own loads the module and ends, so that no handle stays
// on a stack the leak check scans: only the runtime holds the module.
void load_and_run_module(const char* path) {
  fooModule_t module = nullptr;
  OK(fooModuleLoad(&module, path));
  fooFunction_t count_blocks = nullptr;
  OK(fooModuleGetFunction(&count_blocks, module, "count_blocks"));
  constexpr int kStreams = 4;
  constexpr int kBlocks = 16;
  long* counts = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counts), kStreams * kBlocks * sizeof(long)));
  for (int i = 0; i < kStreams; ++i) {
    fooStream_t stream = nullptr;
    OK(fooStreamCreate(&stream));
    long* slice = counts + i * kBlocks;
    OK(fooLaunchKernel(count_blocks, fooDim3{kBlocks, 1, 1}, kOne, &slice, sizeof(slice), 0, stream));
  }
  OK(fooDeviceSynchronize());
  std::vector<long> host(kStreams * kBlocks);
  OK(fooMemcpy(host.data(), counts, host.size() * sizeof(long), fooMemcpyDeviceToHost));
  // Every block ran, and counted on its own thread: each thread's counts are 1, 2, 3, ..., so there
  // are at least as many counts of k - 1 as of k.
  for (const long count : host) {
    EXPECT(count >= 1);
    EXPECT(
        count == 1 || std::count(host.begin(), host.end(), count - 1) >= std::count(host.begin(), host.end(), count));
  }
  OK(fooFree(counts));
}

void test_module_kept_until_exit(const char* path) {
  std::thread(load_and_run_module, path).join();
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--exit-while-busy") {
    return exit_while_busy();
  }
  if (mode == "--touch-from-host" || mode == "--touch-from-kernel") {
    char* device = nullptr;
    OK(fooMalloc(reinterpret_cast<void**>(&device), 64));
    if (mode == "--touch-from-host") {
      *reinterpret_cast<volatile char*>(device) = 1;
    } else {
      fooFunction_t careless = nullptr;
      OK(fooEmuFunctionCreate(&careless, "careless", &careless_kernel));
      OK(fooLaunchKernel(careless, kOne, kOne, &device, sizeof(device), 0, nullptr));
      OK(fooStreamSynchronize(nullptr));
    }
    return finish("emulation (memory was touched, no crash)");
  }
  test_configuration();
  test_kernels();
  test_seam();
  if (mode == "--module" && argc > 2) {
    test_module(argv[2]);
    test_module_kept_until_exit(argv[2]);
  }
  return finish("runtime emulation");
}

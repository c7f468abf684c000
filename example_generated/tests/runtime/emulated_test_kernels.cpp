// The contract test's kernels, module and native work (test_kernels.h) for the emulated device:
// host functions written as emulation.h says (a struct of the typed arguments, in order, reads
// the parameter block), registered with fooEmuFunctionCreate; the module is
// emulated_test_module.cpp, as source and as the shared library CMake builds from it. A driver
// replaces this file with its own.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "../../csrc/runtime/emulation.h"
#include "test_kernels.h"

namespace {

void sleep_kernel(const fooEmuKernelContext*, const void* params) {
  const auto* p = static_cast<const SleepParams*>(params);
  std::this_thread::sleep_for(std::chrono::microseconds(p->microseconds));
}

struct StampArgs {
  int* counter; // Buffer
  int* slot; // Buffer
};

void stamp_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const StampArgs*>(params);
  int* counter = static_cast<int*>(ctx->address(p->counter));
  int* slot = static_cast<int*>(ctx->address(p->slot));
  *slot = (*counter)++;
}

struct FillArgs {
  unsigned char* data; // Buffer
  unsigned char value; // Value
  size_t count; // Value
};

void fill_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const FillArgs*>(params);
  const size_t blocks = static_cast<size_t>(ctx->gridDim.x) * ctx->gridDim.y * ctx->gridDim.z;
  const size_t block =
      ctx->blockIdx.x + ctx->gridDim.x * (ctx->blockIdx.y + static_cast<size_t>(ctx->gridDim.y) * ctx->blockIdx.z);
  const size_t begin = p->count * block / blocks;
  const size_t end = p->count * (block + 1) / blocks;
  auto* data = static_cast<unsigned char*>(ctx->address(p->data));
  std::memset(data + begin, p->value, end - begin);
}

struct TrapArgs {
  int code; // Value
  const char* error; // ErrorFlag: its message
};

void trap_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const TrapArgs*>(params);
  if (p->code != 0) {
    ctx->fail(p->error);
  }
}

struct SwapArgs {
  int* data; // Buffer
  unsigned int n; // Value
  size_t first; // Local: offsets in ctx->sharedMem
  size_t second;
};

// The block's threads one after the other, a loop per phase between barriers.
void swap_kernel(const fooEmuKernelContext* ctx, const void* params) {
  const auto* p = static_cast<const SwapArgs*>(params);
  int* data = static_cast<int*>(ctx->address(p->data));
  auto* first = reinterpret_cast<int*>(static_cast<char*>(ctx->sharedMem) + p->first);
  auto* second = reinterpret_cast<int*>(static_cast<char*>(ctx->sharedMem) + p->second);
  const unsigned n = p->n;
  for (unsigned i = 0; i < n; ++i) {
    first[i] = data[i];
    second[i] = static_cast<int>(i);
  }
  for (unsigned i = 0; i < n; ++i) {
    data[i] = first[n - 1 - i] * 1000 + second[n - 1 - i];
  }
}

TestKernels load() {
  TestKernels k{};
  fooEmuFunctionCreate(&k.sleep, "test_sleep", &sleep_kernel);
  fooEmuFunctionCreate(&k.stamp, "test_stamp", &stamp_kernel);
  fooEmuFunctionCreate(&k.fill, "test_fill", &fill_kernel);
  fooEmuFunctionCreate(&k.trap, "test_trap", &trap_kernel);
  fooEmuFunctionCreate(&k.swap, "test_swap", &swap_kernel);
  return k;
}

std::string read_file(const char* path) {
  std::string bytes;
  if (FILE* f = std::fopen(path, "rb")) {
    char buffer[65536];
    size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) {
      bytes.append(buffer, n);
    }
    std::fclose(f);
  } else {
    std::fprintf(stderr, "cannot read %s\n", path);
  }
  return bytes;
}

// The module's source builds with the include path of emulation.h (CMake gives both paths).
const char* const kModuleOptions = "-I" TEST_RUNTIME_INCLUDE_DIR;

} // namespace

const TestKernels* test_kernels(void) {
  static const TestKernels kernels = load();
  return &kernels;
}

TestModuleImage test_module_source(void) {
  static const std::string source = read_file(TEST_MODULE_SOURCE);
  return TestModuleImage{source.data(), source.size(), fooModuleSource, kModuleOptions};
}

TestModuleImage test_module_binary(void) {
  static const std::string binary = read_file(TEST_MODULE_BINARY);
  return TestModuleImage{binary.data(), binary.size(), fooModuleBinary, nullptr};
}

TestModuleImage test_module_broken_source(void) {
  static const char source[] =
      "#include \"emulation.h\"\n"
      "extern \"C\" void test_add(const fooEmuKernelContext* ctx, const void* params) {\n"
      "  undeclared_in_test_module(ctx, params);\n"
      "}\n";
  return TestModuleImage{source, sizeof(source) - 1, fooModuleSource, kModuleOptions};
}

void test_native_stamp(void* queue, const void* args) {
  if (queue != nullptr) {
    return; // the emulated device has no native queue: this is not its work
  }
  const auto* a = static_cast<const TestNativeStamp*>(args);
  int* counter = reinterpret_cast<int*>(static_cast<char*>(fooEmuAddress(a->counter_buffer)) + a->counter_offset);
  int* slot = reinterpret_cast<int*>(static_cast<char*>(fooEmuAddress(a->slot_buffer)) + a->slot_offset);
  *slot = (*counter)++;
}

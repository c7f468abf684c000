// What the emulated operator library's kernels share: numeric types, dtype dispatch, how a kernel
// is registered and launched, and how an elementwise kernel walks its elements.
//
// Kernels are host functions run by the emulated device (csrc/runtime/emulation.h): each receives
// a parameter block, copied at launch like a device kernel's parameters, and reaches device memory
// only through ctx->address(). Nothing here includes PyTorch: 16-bit floats are the compiler's
// _Float16 and a bfloat16 written below, computed in float as PyTorch's CPU and CUDA kernels do.
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../runtime/emulation.h"
#include "../kernels.h"

namespace torch_foo::kernels {

// ---- numeric types ------------------------------------------------------------------------------

using half = _Float16;

// bfloat16: the upper half of a float32, rounded to nearest even (NaN stays a quiet NaN).
struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  bfloat16(float value) : bits(round(value)) {} // NOLINT: converts like a built-in type
  operator float() const { // NOLINT
    const uint32_t word = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &word, sizeof(value));
    return value;
  }

  static uint16_t round(float value) {
    if (value != value) {
      return 0x7FC0;
    }
    uint32_t word;
    std::memcpy(&word, &value, sizeof(word));
    return static_cast<uint16_t>((word + ((word >> 16) & 1) + 0x7FFF) >> 16);
  }
};

// The type a value is computed in: float for the 16-bit floats, the type itself otherwise.
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<half> {
  using type = float;
};
template <>
struct OpMath<bfloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

template <typename T>
constexpr bool is_complex_v = false;
template <typename T>
constexpr bool is_complex_v<std::complex<T>> = true;

template <typename T>
constexpr bool is_floating_v = std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// Converts between any two element types as PyTorch does: complex to real keeps the real part,
// anything to bool is "not zero", floating to integral truncates.
template <typename To, typename From>
To convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (is_complex_v<From>) {
    if constexpr (is_complex_v<To>) {
      return To(static_cast<typename To::value_type>(value.real()), static_cast<typename To::value_type>(value.imag()));
    } else if constexpr (std::is_same_v<To, bool>) {
      return value.real() != 0 || value.imag() != 0;
    } else {
      return convert<To>(value.real());
    }
  } else if constexpr (is_complex_v<To>) {
    return To(convert<typename To::value_type>(value), 0);
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(value) != 0; // half and bfloat16 compare through float
  } else if constexpr (std::is_same_v<From, bfloat16>) {
    return static_cast<To>(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, bfloat16> || (std::is_same_v<To, half> && !std::is_same_v<From, float>)) {
    return To(static_cast<float>(value)); // as c10::Half and c10::BFloat16 convert: through float
  } else {
    return static_cast<To>(value);
  }
}

// True where the host processor has fused multiply-add instructions, which PyTorch's CPU kernels
// then use (its vectorised kernels for x86 are compiled for AVX2 with FMA, and the compiler
// contracts a * b + c): kernels that must round as the CPU does choose their arithmetic by it.
inline bool host_fuses_multiply_add() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#elif defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

// ---- errors -------------------------------------------------------------------------------------

// Describe a failure for fooOpGetLastErrorMessage() and return its code (library.cpp).
fooError_t fail(fooError_t code, const char* format, ...) __attribute__((format(printf, 2, 3)));
inline fooError_t invalid_argument(const char* function) {
  return fail(fooErrorInvalidValue, "%s: invalid arguments", function);
}
inline fooError_t not_supported(const char* what) {
  return fail(fooErrorNotSupported, "%s is not supported on this device", what);
}

// ---- dtype dispatch -----------------------------------------------------------------------------

// TypeOf<D>::type: the element type of dtype D; data_type_of<T>(): the dtype of element type T.
template <fooDataType D>
struct TypeOf;
#define FOO_TYPE_OF(DTYPE, TYPE, SCALAR_TYPE) \
  template <> \
  struct TypeOf<DTYPE> { \
    using type = TYPE; \
  };
FOO_OP_DTYPES(FOO_TYPE_OF)
#undef FOO_TYPE_OF

template <typename T>
constexpr fooDataType data_type_of() {
#define FOO_IF_TYPE(DTYPE, TYPE, SCALAR_TYPE) \
  if constexpr (std::is_same_v<T, TYPE>) { \
    return DTYPE; \
  } else
  FOO_OP_DTYPES(FOO_IF_TYPE) {
    static_assert(!std::is_same_v<T, T>, "not an element type of the library");
  }
#undef FOO_IF_TYPE
}

// Calls f(T{}) with the element type of `dtype`; returns fooErrorNotSupported for others.
// Families: all 15 types, the floating ones (16-bit included), or those plus the integral ones.
enum class Types { All, Floating, Real };

template <Types kTypes, typename F>
fooError_t dispatch(fooDataType dtype, const F& f) {
  const auto call = [&](auto tag) -> fooError_t {
    using T = decltype(tag);
    if constexpr (kTypes == Types::Floating && !is_floating_v<T>) {
      return fail(fooErrorNotSupported, "data type %d is not supported by this operation", static_cast<int>(dtype));
    } else if constexpr (kTypes == Types::Real && is_complex_v<T>) {
      return fail(fooErrorNotSupported, "data type %d is not supported by this operation", static_cast<int>(dtype));
    } else {
      return f(tag);
    }
  };
  switch (dtype) {
#define FOO_CALL(DTYPE, TYPE, SCALAR_TYPE) \
  case DTYPE: return call(TYPE{});
    FOO_OP_DTYPES(FOO_CALL)
#undef FOO_CALL
  }
  return fail(fooErrorInvalidValue, "%d is not a fooDataType", static_cast<int>(dtype));
}

// ---- kernels and launches -----------------------------------------------------------------------

// The handle of kernel K, registered with the runtime on first use. `name` shows in errors and
// traces, as a device kernel's symbol name does.
template <fooEmuKernel K>
fooFunction_t function(const char* name) {
  static const fooFunction_t handle = [name] {
    fooFunction_t f = nullptr;
    fooEmuFunctionCreate(&f, name, K);
    return f;
  }();
  return handle;
}

// Launches `f` over `blocks` blocks (a 2-D grid past the x limit) with a parameter block; a failure
// carries the runtime's message (library.cpp).
fooError_t launch(fooFunction_t f, uint64_t blocks, const void* params, size_t size, fooStream_t stream);

inline uint64_t block_index(const fooEmuKernelContext* ctx) {
  return ctx->blockIdx.x + static_cast<uint64_t>(ctx->gridDim.x) * ctx->blockIdx.y;
}

template <typename T>
T* device_address(const fooEmuKernelContext* ctx, T* ptr) {
  return static_cast<T*>(ctx->address(ptr));
}

// ---- elementwise kernels ------------------------------------------------------------------------

// Elements per block: a block is one run of the inner loop on one host thread (a launch may take
// fewer per block when each element costs more: a sum's element is a whole column).
constexpr int64_t kGrain = 32768;
constexpr int kMaxDims = FOO_OP_MAX_DIMS;
constexpr int kMaxOperands = FOO_OP_MAX_OPERANDS;

// The parameter block of an elementwise kernel: this header, then sizes[ndim] and the byte strides
// [ndim][noperands], packed so that small iterations travel inside the launch.
struct IterParams {
  int32_t ndim;
  int32_t noperands;
  int64_t numel;
  int64_t grain; // elements per block
  char* data[kMaxOperands]; // null for a scalar operand
  alignas(16) uint64_t values[kMaxOperands][2];
  alignas(16) unsigned char op[64]; // the kernel's own arguments (an alpha, a seed and offset)

  const int64_t* sizes() const {
    return reinterpret_cast<const int64_t*>(this + 1);
  }
  const int64_t* strides() const { // [dim][operand]
    return sizes() + ndim;
  }
};

constexpr size_t kMaxIterParams = sizeof(IterParams) + sizeof(int64_t) * kMaxDims * (1 + kMaxOperands);

// A packed elementwise parameter block, built on the host from a fooIter.
struct PackedIter {
  alignas(16) unsigned char bytes[kMaxIterParams];
  size_t size = 0;

  IterParams& header() {
    return *reinterpret_cast<IterParams*>(bytes);
  }
  template <typename Op>
  void set_op(const Op& op) {
    static_assert(sizeof(Op) <= sizeof(IterParams::op) && std::is_trivially_copyable_v<Op>);
    std::memcpy(header().op, &op, sizeof(Op));
  }
};

// Packs `it` (ndim and operand counts checked); the number of elements is returned in *numel.
fooError_t pack(const fooIter* it, int noperands, PackedIter* packed, int64_t* numel);

// The inner loop of an elementwise kernel, type-erased: run(loop, ctx, ptrs, strides, n, first) is
// called for runs of n elements along dimension 0, starting at linear index `first`. The walk over
// the other dimensions (walk(), library.cpp) is compiled once for all kernels instead of once per
// loop: a build-time saving for one indirect call per run.
using Context = fooEmuKernelContext;
using RunFn =
    void (*)(const void* loop, const Context* ctx, char** data, const int64_t* strides, int64_t n, int64_t first);

// Walks one block (ctx->blockIdx) of the packed iteration `p`, calling `run` on each run.
void walk(const fooEmuKernelContext* ctx, const IterParams& p, RunFn run, const void* loop);

template <typename Loop>
void call_run(const void* loop, const Context* ctx, char** data, const int64_t* strides, int64_t n, int64_t first) {
  static_cast<const Loop*>(loop)->run(ctx, data, strides, n, first);
}

// The kernel of an elementwise Loop: its members (an alpha, a seed) travel in the parameter block; a
// loop that holds device pointers among them translates them with ctx.
template <typename Loop>
void elementwise_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  const auto& p = *static_cast<const IterParams*>(raw);
  Loop loop;
  std::memcpy(static_cast<void*>(&loop), p.op, sizeof(Loop));
  walk(ctx, p, &call_run<Loop>, &loop);
}

// Packs `it` and launches Loop (whose members are its arguments) on `stream`.
template <typename Loop>
fooError_t launch_elementwise(
    const char* name,
    const fooIter* it,
    int noperands,
    const Loop& loop,
    fooStream_t stream,
    int64_t grain = kGrain) { // elements a block
  static_assert(std::is_trivially_copyable_v<Loop>, "a loop's arguments are copied as bytes");
  PackedIter packed;
  int64_t numel = 0;
  if (const fooError_t error = pack(it, noperands, &packed, &numel); error != fooSuccess) {
    return error;
  }
  if (numel == 0) {
    return fooSuccess;
  }
  packed.set_op(loop);
  packed.header().grain = std::max<int64_t>(1, grain);
  const auto blocks = static_cast<uint64_t>((numel + packed.header().grain - 1) / packed.header().grain);
  return launch(function<&elementwise_kernel<Loop>>(name), blocks, packed.bytes, packed.size, stream);
}

} // namespace torch_foo::kernels

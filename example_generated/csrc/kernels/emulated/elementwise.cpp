// Elementwise kernels of the emulated device: fill, copy with conversion, add/mul/div.
#include <cmath>

#include "device.h"

namespace torch_foo::kernels {
namespace {

struct alignas(16) Bytes16 {
  uint64_t lo;
  uint64_t hi;
};

size_t element_size(fooDataType dtype) {
  switch (dtype) {
    case fooBool:
    case fooUInt8:
    case fooInt8: return 1;
    case fooInt16:
    case fooUInt16:
    case fooFloat16:
    case fooBFloat16: return 2;
    case fooInt32:
    case fooUInt32:
    case fooFloat32: return 4;
    case fooInt64:
    case fooUInt64:
    case fooFloat64:
    case fooComplex64: return 8;
    case fooComplex128: return 16;
  }
  return 0;
}

// out = value, for elements of sizeof(Word) bytes: no type dispatch needed.
template <typename Word>
struct FillLoop {
  Word value;
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t) const {
    if (strides[0] == sizeof(Word)) {
      std::fill_n(reinterpret_cast<Word*>(data[0]), n, value);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Word*>(data[0] + i * strides[0]) = value;
      }
    }
  }
};

// out = in for elements of sizeof(Word) bytes (one dtype, no conversion).
template <typename Word>
struct MoveLoop {
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t) const {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(data[0] + i * strides[0], data[1] + i * strides[1], sizeof(Word));
    }
  }
};

// Conversions between any two of the 15 dtypes, in two passes over chunks of a run: each source
// type loads into the widest type of its kind without rounding (int64, uint64, double,
// complex<double>), and each destination type stores from a kind with one rounding, exactly as a
// direct conversion rounds. 15 loaders and 15 x 4 storers instead of 225 conversion loops.
enum class Kind : uint8_t { Signed, Unsigned, Real, Complex };

union Wide {
  int64_t i;
  uint64_t u;
  double f;
  std::complex<double> c;
  Wide() : c() {}
};

template <typename T>
constexpr Kind kind_of() {
  if constexpr (is_complex_v<T>) {
    return Kind::Complex;
  } else if constexpr (is_floating_v<T>) {
    return Kind::Real;
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return Kind::Unsigned;
  } else {
    return Kind::Signed; // bool and the other integers fit int64
  }
}

constexpr int64_t kChunk = 256;

template <typename From>
void load(const char* src, int64_t stride, int64_t n, bool conjugate, bool negate, Wide* out) {
  for (int64_t i = 0; i < n; ++i) {
    From value = *reinterpret_cast<const From*>(src + i * stride);
    if constexpr (is_complex_v<From>) {
      if (conjugate) {
        value = std::conj(value);
      }
    }
    if constexpr (!std::is_same_v<From, bool>) {
      if (negate) {
        value = From(-value);
      }
    }
    constexpr Kind kind = kind_of<From>();
    if constexpr (kind == Kind::Complex) {
      out[i].c = std::complex<double>(value.real(), value.imag());
    } else if constexpr (kind == Kind::Real) {
      out[i].f = static_cast<double>(static_cast<opmath_t<From>>(value));
    } else if constexpr (kind == Kind::Unsigned) {
      out[i].u = value;
    } else {
      out[i].i = static_cast<int64_t>(value);
    }
  }
}

template <typename To, Kind kFrom, typename Exact>
void store_as(const Wide* in, char* dst, int64_t stride, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    Exact value;
    if constexpr (kFrom == Kind::Complex) {
      value = in[i].c;
    } else if constexpr (kFrom == Kind::Real) {
      value = in[i].f;
    } else if constexpr (kFrom == Kind::Unsigned) {
      value = in[i].u;
    } else {
      value = in[i].i;
    }
    *reinterpret_cast<To*>(dst + i * stride) = convert<To>(value);
  }
}

// Stores values that came from a source of kind `from` (convert() rounds a double to half or
// bfloat16 through float, as c10 does, which is exact for values that were float to begin with).
template <typename To>
void store(Kind from, const Wide* in, char* dst, int64_t stride, int64_t n) {
  switch (from) {
    case Kind::Complex: store_as<To, Kind::Complex, std::complex<double>>(in, dst, stride, n); break;
    case Kind::Real: store_as<To, Kind::Real, double>(in, dst, stride, n); break;
    case Kind::Unsigned: store_as<To, Kind::Unsigned, uint64_t>(in, dst, stride, n); break;
    case Kind::Signed: store_as<To, Kind::Signed, int64_t>(in, dst, stride, n); break;
  }
}

using LoadFn = void (*)(const char*, int64_t, int64_t, bool, bool, Wide*);
using StoreFn = void (*)(Kind, const Wide*, char*, int64_t, int64_t);

struct ConvertLoop {
  LoadFn load_fn;
  StoreFn store_fn;
  Kind from_kind;
  bool conjugate;
  bool negate;
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t) const {
    Wide buffer[kChunk];
    for (int64_t done = 0; done < n; done += kChunk) {
      const int64_t count = std::min(kChunk, n - done);
      load_fn(data[1] + done * strides[1], strides[1], count, conjugate, negate, buffer);
      store_fn(from_kind, buffer, data[0] + done * strides[0], strides[0], count);
    }
  }
};

template <typename T>
opmath_t<T> scalar_as(const fooScalar& s) {
  using M = opmath_t<T>;
  if constexpr (is_complex_v<M>) {
    return M(static_cast<typename M::value_type>(s.real), static_cast<typename M::value_type>(s.imag));
  } else if constexpr (std::is_same_v<M, bool>) {
    return s.integer != 0;
  } else if constexpr (std::is_integral_v<M>) {
    return static_cast<M>(s.integer);
  } else {
    return static_cast<M>(s.real);
  }
}

// The arithmetic of PyTorch's kernels: operands in opmath precision (float for the 16-bit floats),
// one rounding at the end. a + alpha * b of floating types is one fused multiply-add, as PyTorch's
// vectorised CPU kernels and CUDA's compute it (an optimizer's p.add_(g, alpha=-lr) rounds once).
template <typename T>
struct Add {
  opmath_t<T> alpha;
  bool unit; // alpha == 1: a plain sum, which the fused form gives too
  T operator()(opmath_t<T> a, opmath_t<T> b) const {
    if constexpr (std::is_floating_point_v<opmath_t<T>>) {
      return static_cast<T>(unit ? a + b : std::fma(b, alpha, a));
    } else {
      return static_cast<T>(a + alpha * b);
    }
  }
};

template <typename T>
struct Mul {
  T operator()(opmath_t<T> a, opmath_t<T> b) const {
    return static_cast<T>(a * b);
  }
};

template <typename T>
struct Div {
  T operator()(opmath_t<T> a, opmath_t<T> b) const {
    return static_cast<T>(a / b);
  }
};

// out = a + alpha * b over contiguous float or double arrays with the processor's fused
// multiply-add instructions, where it has them: std::fma compiled for the baseline x86-64 is a
// library call per element (an optimizer's p.add_(g, alpha=-lr) ran many times slower than the
// CPU's vectorised kernel: the template's docs/device/performance.md). The same single rounding,
// so the same results.
#if defined(__x86_64__) && defined(__GNUC__)
template <typename T>
__attribute__((target("avx2,fma"))) void fused_add(T* out, const T* a, const T* b, T alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, float>) {
      out[i] = __builtin_fmaf(b[i], alpha, a[i]);
    } else {
      out[i] = __builtin_fma(b[i], alpha, a[i]);
    }
  }
}

#endif

// out = op(a, b); fast paths for contiguous operands and a broadcast operand.
template <typename T, typename Op>
struct BinaryLoop {
  Op op;
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t) const {
    using M = opmath_t<T>;
    constexpr int64_t s = sizeof(T);
    auto* out = reinterpret_cast<T*>(data[0]);
    const auto* a = reinterpret_cast<const T*>(data[1]);
    const auto* b = reinterpret_cast<const T*>(data[2]);
    const bool contiguous = strides[0] == s && strides[1] == s && strides[2] == s;
#if defined(__x86_64__) && defined(__GNUC__)
    if constexpr (std::is_same_v<Op, Add<T>> && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
      if (contiguous && !op.unit && host_fuses_multiply_add()) {
        fused_add(out, a, b, op.alpha, n);
        return;
      }
    }
#endif
    if (contiguous) {
      for (int64_t i = 0; i < n; ++i) {
        out[i] = op(static_cast<M>(a[i]), static_cast<M>(b[i]));
      }
    } else if (strides[0] == s && strides[1] == s && strides[2] == 0) {
      const auto bv = static_cast<M>(*b);
      for (int64_t i = 0; i < n; ++i) {
        out[i] = op(static_cast<M>(a[i]), bv);
      }
    } else if (strides[0] == s && strides[1] == 0 && strides[2] == s) {
      const auto av = static_cast<M>(*a);
      for (int64_t i = 0; i < n; ++i) {
        out[i] = op(av, static_cast<M>(b[i]));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<T*>(data[0] + i * strides[0]) =
            op(static_cast<M>(*reinterpret_cast<const T*>(data[1] + i * strides[1])),
               static_cast<M>(*reinterpret_cast<const T*>(data[2] + i * strides[2])));
      }
    }
  }
};

// out = op(a, b) for a scalar b, which travels in the loop in opmath precision.
template <typename T, typename Op>
struct ScalarLoop {
  Op op;
  opmath_t<T> b;
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t) const {
    using M = opmath_t<T>;
    if (strides[0] == sizeof(T) && strides[1] == sizeof(T)) {
      auto* out = reinterpret_cast<T*>(data[0]);
      const auto* a = reinterpret_cast<const T*>(data[1]);
      for (int64_t i = 0; i < n; ++i) {
        out[i] = op(static_cast<M>(a[i]), b);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<T*>(data[0] + i * strides[0]) =
            op(static_cast<M>(*reinterpret_cast<const T*>(data[1] + i * strides[1])), b);
      }
    }
  }
};

// Launches op over (out, a, b), or over (out, a) with b in the loop when b is a scalar operand.
template <typename T, typename Op>
fooError_t launch_binary(const char* name, const fooIter* it, const Op& op, fooStream_t stream) {
  if (it->data[2] != nullptr) {
    return launch_elementwise(name, it, 3, BinaryLoop<T, Op>{op}, stream);
  }
  opmath_t<T> b;
  if (it->dtype[2] == fooFloat32) { // a float32 number for a 16-bit operation: used unrounded
    float value;
    std::memcpy(&value, it->value[2], sizeof(value));
    b = static_cast<opmath_t<T>>(value);
  } else {
    T value;
    std::memcpy(static_cast<void*>(&value), it->value[2], sizeof(value));
    b = static_cast<opmath_t<T>>(value);
  }
  fooIter two = *it;
  two.noperands = 2;
  return launch_elementwise(name, &two, 2, ScalarLoop<T, Op>{op, b}, stream);
}

template <typename Word>
fooError_t fill_words(const fooIter* it, const void* value, fooStream_t stream) {
  FillLoop<Word> loop;
  std::memcpy(&loop.value, value, sizeof(Word));
  return launch_elementwise("fill", it, 1, loop, stream);
}

template <typename Word>
fooError_t move_words(const fooIter* it, fooStream_t stream) {
  return launch_elementwise("copy", it, 2, MoveLoop<Word>{}, stream);
}

} // namespace
} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" {

fooError_t fooOpFill(const fooIter* it, const void* value, fooStream_t stream) {
  if (it == nullptr || value == nullptr || it->noperands != 1) {
    return invalid_argument(__func__);
  }
  switch (element_size(it->dtype[0])) {
    case 1: return fill_words<uint8_t>(it, value, stream);
    case 2: return fill_words<uint16_t>(it, value, stream);
    case 4: return fill_words<uint32_t>(it, value, stream);
    case 8: return fill_words<uint64_t>(it, value, stream);
    case 16: return fill_words<Bytes16>(it, value, stream);
  }
  return not_supported("this data type");
}

fooError_t fooOpCopy(const fooIter* it, int conjugate, int negate, fooStream_t stream) {
  if (it == nullptr || it->noperands != 2) {
    return invalid_argument(__func__);
  }
  const fooDataType to = it->dtype[0];
  const fooDataType from = it->dtype[1];
  const bool complex = from == fooComplex64 || from == fooComplex128;
  if (to == from && !negate && !(conjugate && complex)) {
    switch (element_size(to)) {
      case 1: return move_words<uint8_t>(it, stream);
      case 2: return move_words<uint16_t>(it, stream);
      case 4: return move_words<uint32_t>(it, stream);
      case 8: return move_words<uint64_t>(it, stream);
      case 16: return move_words<Bytes16>(it, stream);
    }
    return not_supported("this data type");
  }
  ConvertLoop loop{};
  loop.conjugate = conjugate != 0;
  loop.negate = negate != 0;
  const fooError_t found = dispatch<Types::All>(from, [&](auto tag) {
    loop.load_fn = &load<decltype(tag)>;
    loop.from_kind = kind_of<decltype(tag)>();
    return fooSuccess;
  });
  if (found != fooSuccess) {
    return found;
  }
  const fooError_t stored = dispatch<Types::All>(to, [&](auto tag) {
    loop.store_fn = &store<decltype(tag)>;
    return fooSuccess;
  });
  if (stored != fooSuccess) {
    return stored;
  }
  return launch_elementwise("copy", it, 2, loop, stream);
}

fooError_t fooOpBinary(fooBinaryOp op, const fooIter* it, fooScalar alpha, fooStream_t stream) {
  if (it == nullptr || it->noperands != 3 || it->dtype[1] != it->dtype[0]) {
    return invalid_argument(__func__);
  }
  const fooDataType dtype = it->dtype[0];
  const bool sixteen_bit = dtype == fooFloat16 || dtype == fooBFloat16;
  const bool float_scalar = it->data[2] == nullptr && it->dtype[2] == fooFloat32;
  if (it->dtype[2] != dtype && !(float_scalar && sixteen_bit && op != fooBinaryAdd)) {
    return invalid_argument(__func__);
  }
  return dispatch<Types::All>(dtype, [&](auto tag) -> fooError_t {
    using T = decltype(tag);
    switch (op) {
      case fooBinaryAdd: {
        const opmath_t<T> a = scalar_as<T>(alpha);
        return launch_binary<T>("add", it, Add<T>{a, a == opmath_t<T>(1)}, stream);
      }
      case fooBinaryMul: return launch_binary<T>("mul", it, Mul<T>{}, stream);
      case fooBinaryDiv:
        if constexpr (std::is_integral_v<T>) {
          return not_supported("integer division (PyTorch divides integers in floating point)");
        } else {
          return launch_binary<T>("div", it, Div<T>{}, stream);
        }
    }
    return invalid_argument(__func__);
  });
}

} // extern "C"

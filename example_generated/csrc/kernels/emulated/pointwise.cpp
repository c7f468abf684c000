// Activations, optimizer updates and powers of the emulated device: fooOpPointwise. (Sums: sums.cpp.)
//
// They round as PyTorch's CPU kernels do on this host, so that a model trained here equals one
// trained on the CPU: the 16-bit types computed in float, and a multiply followed by an add fused
// into one rounding where the host processor fuses it (host_fuses_multiply_add()).
#include <cmath>

#include "../native.h"
#include "device.h"
#include "host_math.h"

namespace torch_foo::kernels {
namespace {

// a * b + c, rounded once when `fused`.
template <typename M>
inline M mul_add(M a, M b, M c, bool fused) {
  if constexpr (std::is_same_v<M, float>) {
    return fused ? __builtin_fmaf(a, b, c) : a * b + c;
  } else {
    return fused ? __builtin_fma(a, b, c) : a * b + c;
  }
}

// The element operations, on values in opmath precision (float for the 16-bit types). Their
// members travel in the launch's parameter block.
// HostOp is only a tag: host_unary() (host_math.h) runs the CPU's own operator for the operations
// whose results come from its vector math library (square roots, powers), so no element loop is
// instantiated for them.
template <typename M>
struct HostOp {
  static constexpr int kInputs = 1;
  HostUnary op;
  double value; // pow's exponent
};

template <typename M>
struct Relu {
  static constexpr int kInputs = 1;
  M operator()(M x) const {
    return x < M(0) ? M(0) : x;
  }
};

template <typename M>
struct ThresholdBackward {
  static constexpr int kInputs = 2;
  M threshold;
  M operator()(M grad, M x) const {
    return x <= threshold ? M(0) : grad;
  }
};

template <typename M>
struct Addcmul {
  static constexpr int kInputs = 3;
  M value;
  bool fused;
  M operator()(M self, M a, M b) const {
    return mul_add(value * a, b, self, fused);
  }
};

template <typename M>
struct Addcdiv {
  static constexpr int kInputs = 3;
  M value;
  M operator()(M self, M a, M b) const {
    return self + value * a / b;
  }
};

template <typename M>
inline M lerp(M self, M end, M weight, bool fused) {
  const M difference = end - self;
  return std::abs(weight) < M(0.5) ? mul_add(weight, difference, self, fused)
                                   : mul_add(weight - M(1), difference, end, fused);
}

template <typename M>
struct LerpScalar {
  static constexpr int kInputs = 2;
  M weight;
  bool small; // |weight| < 0.5, decided once instead of per element
  bool fused;
  M operator()(M self, M end) const {
    return small ? mul_add(weight, end - self, self, fused) : mul_add(weight - M(1), end - self, end, fused);
  }
};

template <typename M>
struct LerpTensor {
  static constexpr int kInputs = 3;
  bool fused;
  M operator()(M self, M end, M weight) const {
    return lerp(self, end, weight, fused);
  }
};

// out[i] = op(inputs[i]...) over n contiguous elements.
template <typename T, typename Op>
inline void contiguous_run(const Op& op, char** data, int64_t n) {
  using M = opmath_t<T>;
  auto* out = reinterpret_cast<T*>(data[0]);
  const auto* a = reinterpret_cast<const T*>(data[1]);
  if constexpr (Op::kInputs == 1) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<T>(op(static_cast<M>(a[i])));
    }
  } else if constexpr (Op::kInputs == 2) {
    const auto* b = reinterpret_cast<const T*>(data[2]);
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<T>(op(static_cast<M>(a[i]), static_cast<M>(b[i])));
    }
  } else {
    const auto* b = reinterpret_cast<const T*>(data[2]);
    const auto* c = reinterpret_cast<const T*>(data[3]);
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<T>(op(static_cast<M>(a[i]), static_cast<M>(b[i]), static_cast<M>(c[i])));
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same, compiled for the processors PyTorch's vectorised CPU kernels run on: the loops
// vectorise and a fused multiply-add is one instruction (for the baseline x86-64 it is a library
// call per element). Only called where host_fuses_multiply_add(); no operation above leaves a
// multiply and an add for the compiler to contract that the CPU's kernel rounds twice.
template <typename T, typename Op>
__attribute__((target("avx2,fma"))) void contiguous_run_fma(const Op& op, char** data, int64_t n) {
  contiguous_run<T>(op, data, n);
}
#endif

template <typename T, typename Op>
struct PointwiseLoop {
  Op op;
  void run(const fooEmuKernelContext* ctx, char** data, const int64_t* strides, int64_t n, int64_t) const {
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<Op, HostOp<M>>) {
      host_unary(ctx, op.op, op.value, data_type_of<T>(), data[0], strides[0], data[1], strides[1], n);
    } else {
      constexpr int kOperands = Op::kInputs + 1;
      bool contiguous = true;
      for (int k = 0; k < kOperands; ++k) {
        contiguous = contiguous && strides[k] == static_cast<int64_t>(sizeof(T));
      }
      if (contiguous) {
#if defined(__x86_64__) && defined(__GNUC__)
        if (host_fuses_multiply_add()) {
          contiguous_run_fma<T>(op, data, n);
          return;
        }
#endif
        contiguous_run<T>(op, data, n);
        return;
      }
      const auto at = [&](int k, int64_t i) {
        return static_cast<M>(*reinterpret_cast<const T*>(data[k] + i * strides[k]));
      };
      for (int64_t i = 0; i < n; ++i) {
        T& out = *reinterpret_cast<T*>(data[0] + i * strides[0]);
        if constexpr (Op::kInputs == 1) {
          out = static_cast<T>(op(at(1, i)));
        } else if constexpr (Op::kInputs == 2) {
          out = static_cast<T>(op(at(1, i), at(2, i)));
        } else {
          out = static_cast<T>(op(at(1, i), at(2, i), at(3, i)));
        }
      }
    }
  }
};

template <typename T, typename Op>
fooError_t launch_pointwise(const char* name, const fooIter* it, const Op& op, fooStream_t stream) {
  constexpr int kOperands = Op::kInputs + 1;
  if (it->noperands != kOperands) {
    return fail(fooErrorInvalidValue, "%s takes %d operands, not %d", name, kOperands, it->noperands);
  }
  int64_t numel = 1;
  for (int d = 0; d < it->ndim; ++d) {
    numel *= it->sizes[d];
  }
  for (int k = 0; k < kOperands && numel != 0; ++k) {
    if (it->data[k] == nullptr) {
      return fail(fooErrorInvalidValue, "%s: operand %d is not a tensor", name, k);
    }
  }
  return launch_elementwise(name, it, kOperands, PointwiseLoop<T, Op>{op}, stream);
}

} // namespace
} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" {

fooError_t fooOpPointwise(
    fooPointwiseOp op,
    const fooIter* it,
    fooScalar value, // a value, threshold or weight (kernels.h)
    fooStream_t stream) {
  if (it == nullptr || it->noperands < 2) {
    return invalid_argument(__func__);
  }
  for (int k = 1; k < it->noperands; ++k) {
    if (it->dtype[k] != it->dtype[0]) {
      return fail(fooErrorInvalidValue, "%s: the operands' data types differ", __func__);
    }
  }
  const bool fused = host_fuses_multiply_add();
  return dispatch<Types::Floating>(it->dtype[0], [&](auto tag) -> fooError_t {
    using T = decltype(tag);
    using M = opmath_t<T>;
    const auto v = static_cast<M>(value.real);
    switch (op) {
      case fooPointwiseSqrt: return launch_pointwise<T>("sqrt", it, HostOp<M>{HostUnary::Sqrt, 0}, stream);
      case fooPointwiseRelu: return launch_pointwise<T>("relu", it, Relu<M>{}, stream);
      case fooPointwiseThresholdBackward:
        return launch_pointwise<T>("threshold_backward", it, ThresholdBackward<M>{v}, stream);
      case fooPointwiseAddcmul: return launch_pointwise<T>("addcmul", it, Addcmul<M>{v, fused}, stream);
      case fooPointwiseAddcdiv: return launch_pointwise<T>("addcdiv", it, Addcdiv<M>{v}, stream);
      case fooPointwiseLerp:
        if (it->noperands == 3) {
          return launch_pointwise<T>("lerp", it, LerpScalar<M>{v, std::abs(v) < M(0.5), fused}, stream);
        }
        return launch_pointwise<T>("lerp", it, LerpTensor<M>{fused}, stream);
      case fooPointwisePow: return launch_pointwise<T>("pow", it, HostOp<M>{HostUnary::Pow, value.real}, stream);
    }
    return fail(fooErrorInvalidValue, "%s: unknown operation %d", __func__, static_cast<int>(op));
  });
}

} // extern "C"

// Activations, optimizer updates and sums of the emulated device: fooOpPointwise and fooOpSum.
//
// They round as PyTorch's CPU kernels do on this host, so that a model trained here equals one
// trained on the CPU: the 16-bit types computed in float, and a multiply followed by an add fused
// into one rounding where the host processor fuses it (host_fuses_multiply_add()).
#include <cmath>

#include "device.h"

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
// Sqrt is only a tag: host_sqrt() (device.h) computes the CPU's square roots, which are not always
// correctly rounded, so no element loop is instantiated for it.
template <typename M>
struct Sqrt {
  static constexpr int kInputs = 1;
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

template <typename T>
constexpr fooDataType data_type() {
  if constexpr (std::is_same_v<T, half>) {
    return fooFloat16;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return fooBFloat16;
  } else if constexpr (std::is_same_v<T, float>) {
    return fooFloat32;
  } else {
    return fooFloat64;
  }
}

template <typename T, typename Op>
struct PointwiseLoop {
  Op op;
  void run(const fooEmuKernelContext* ctx, char** data, const int64_t* strides, int64_t n, int64_t) const {
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<Op, Sqrt<M>>) {
      host_sqrt(ctx, data_type<T>(), data[0], strides[0], data[1], strides[1], n); // the CPU's roots
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

// ---- sums ---------------------------------------------------------------------------------------

// ceil(log2(n)), and 1 for n <= 2.
inline int64_t ceil_log2(int64_t n) {
  return n <= 2 ? 1 : 64 - __builtin_clzll(static_cast<uint64_t>(n - 1));
}

// Sums of `count` elements `stride` bytes apart, for `columns` sums whose first elements are
// `step` bytes apart, in blocks: running sums of `block` elements (16, more for sums of over half a
// million) are added into a sum of blocks, which is added into the next level after `block`
// blocks, and so on over four levels: only numbers of a similar size are added together, in one
// pass with constant memory. This is the order of PyTorch's CPU sum for each column. Up to
// kColumns sums advance together, row by row: a column of a row-major matrix read alone would
// touch one cache line per element, and rows a power of two apart evict one another.
constexpr int64_t kColumns = 64;

template <typename T>
void block_sums(const char* in, int64_t step, int64_t columns, int64_t count, int64_t stride, opmath_t<T>* sums) {
  using M = opmath_t<T>;
  constexpr int kLevels = 4;
  const int64_t power = std::max<int64_t>(4, ceil_log2(count) / kLevels);
  const int64_t block = int64_t(1) << power;
  const int64_t mask = block - 1;
  M acc[kLevels][kColumns] = {};
  const auto add_row = [&](int64_t i) {
    const char* row = in + i * stride;
    if (step == static_cast<int64_t>(sizeof(T))) { // adjacent columns: a loop the compiler vectorises
      const auto* values = reinterpret_cast<const T*>(row);
      for (int64_t c = 0; c < columns; ++c) {
        acc[0][c] += static_cast<M>(values[c]);
      }
    } else {
      for (int64_t c = 0; c < columns; ++c) {
        acc[0][c] += static_cast<M>(*reinterpret_cast<const T*>(row + c * step));
      }
    }
  };
  int64_t i = 0;
  while (i + block <= count) {
    for (int64_t j = 0; j < block; ++j, ++i) {
      add_row(i);
    }
    for (int level = 1; level < kLevels; ++level) {
      for (int64_t c = 0; c < columns; ++c) {
        acc[level][c] += acc[level - 1][c];
        acc[level - 1][c] = M(0);
      }
      if ((i & (mask << (level * power))) != 0) {
        break;
      }
    }
  }
  for (; i < count; ++i) {
    add_row(i);
  }
  for (int64_t c = 0; c < columns; ++c) {
    for (int level = 1; level < kLevels; ++level) {
      acc[0][c] += acc[level][c];
    }
    sums[c] = acc[0][c];
  }
}

// One sum (its elements in order in memory, or a single sum), as the CPU sums one row: four
// interleaved sums in blocks (elements 0, 4, 8, ..., then 1, 5, 9, ...: four independent chains
// of additions for the processor to overlap), the remaining elements added to the first, then the
// four added in order.
template <typename T>
opmath_t<T> block_sum(const char* in, int64_t count, int64_t stride) {
  constexpr int64_t kInterleave = 4;
  const int64_t rows = count / kInterleave;
  opmath_t<T> partial[kInterleave];
  block_sums<T>(in, stride, kInterleave, rows, stride * kInterleave, partial);
  for (int64_t i = rows * kInterleave; i < count; ++i) {
    partial[0] += static_cast<opmath_t<T>>(*reinterpret_cast<const T*>(in + i * stride));
  }
  for (int64_t k = 1; k < kInterleave; ++k) {
    partial[0] += partial[k];
  }
  return partial[0];
}

template <typename T>
struct SumLoop {
  int64_t count;
  int64_t stride;
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t) const {
    if (stride == static_cast<int64_t>(sizeof(T)) || n == 1) { // each sum reads its memory in order
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<T*>(data[0] + i * strides[0]) =
            static_cast<T>(block_sum<T>(data[1] + i * strides[1], count, stride));
      }
      return;
    }
    opmath_t<T> sums[kColumns];
    for (int64_t first = 0; first < n; first += kColumns) {
      const int64_t columns = std::min(kColumns, n - first);
      block_sums<T>(data[1] + first * strides[1], strides[1], columns, count, stride, sums);
      for (int64_t c = 0; c < columns; ++c) {
        *reinterpret_cast<T*>(data[0] + (first + c) * strides[0]) = static_cast<T>(sums[c]);
      }
    }
  }
};

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
      case fooPointwiseSqrt: return launch_pointwise<T>("sqrt", it, Sqrt<M>{}, stream);
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
    }
    return fail(fooErrorInvalidValue, "%s: unknown operation %d", __func__, static_cast<int>(op));
  });
}

fooError_t fooOpSum(const fooIter* it, int64_t count, int64_t stride, fooStream_t stream) {
  if (it == nullptr || it->noperands != 2 || count < 0 || it->dtype[1] != it->dtype[0]) {
    return invalid_argument(__func__);
  }
  return dispatch<Types::Floating>(it->dtype[0], [&](auto tag) {
    using T = decltype(tag);
    // A block sums about kGrain elements: a column of a tall matrix is a sum's worth of work.
    const int64_t grain = std::max(kColumns, kGrain / std::max<int64_t>(count, 1));
    return launch_elementwise("sum", it, 2, SumLoop<T>{count, stride}, stream, grain);
  });
}

} // extern "C"

// Sums of the emulated device: fooOpSum, in the order of PyTorch's CPU sum on this host, so that
// a model trained here equals one trained on the CPU (the 16-bit types summed in float).
#include <algorithm>
#include <cstdint>

#include "../native.h"
#include "device.h"

namespace torch_foo::kernels {
namespace {

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

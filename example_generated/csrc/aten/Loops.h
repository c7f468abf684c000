// Elementwise kernels: what a device kernel receives and how it walks its elements.
//
// The host side builds an at::TensorIterator, which broadcasts shapes, checks devices and memory
// overlap, allocates missing outputs and coalesces dimensions. The kernel gets only plain data:
// the operands' device pointers and the iteration geometry (sizes and byte strides, dimension 0
// innermost). It runs the elements in chunks, and in parallel for large tensors, the way a GPU
// grid splits the index space into blocks (at::parallel_for on the stream's worker thread, which
// gets its own OpenMP team). A scalar operand is passed by value inside the
// argument block and read with stride 0.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <type_traits>

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <c10/util/SmallVector.h>

#include "../core/Launch.h"

namespace torch_foo {

// Iteration dimensions after TensorIterator coalesced them: size-1 dimensions disappear, so more
// than 63 would need over 2^63 elements.
constexpr int kMaxDims = 64;

template <int NARGS>
struct Geometry {
  int64_t numel = 0;
  c10::SmallVector<int64_t, 6> shape;
  c10::SmallVector<std::array<int64_t, NARGS>, 6> strides; // [dim][operand], in bytes
};

// The argument block of an elementwise kernel over NARGS operands (outputs first).
template <int NARGS>
struct ElementwiseArgs {
  Geometry<NARGS> geometry;
  std::array<char*, NARGS> data{};
  // Operands passed by value (a Python number in `x + 1`): data[i] is null and the bytes are here.
  alignas(16) std::array<std::array<char, 16>, NARGS> values{};

  char* base(int arg) {
    return data[arg] != nullptr ? data[arg] : values[arg].data();
  }
};

// Fills `args` from an iterator whose operands occupy the argument slots listed in `slots`;
// the remaining slots must be set as values with set_value().
template <int NARGS>
ElementwiseArgs<NARGS> make_args(const at::TensorIteratorBase& iter, c10::ArrayRef<int> slots) {
  ElementwiseArgs<NARGS> args;
  auto& g = args.geometry;
  g.numel = iter.numel();
  const auto shape = iter.shape();
  g.shape.assign(shape.begin(), shape.end());
  g.strides.resize(shape.size());
  for (auto& row : g.strides) {
    row.fill(0);
  }
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(slots.size()) == iter.ntensors());
  TORCH_INTERNAL_ASSERT(iter.ndim() <= kMaxDims);
  for (size_t i = 0; i < slots.size(); ++i) {
    const int slot = slots[i];
    args.data[slot] = static_cast<char*>(iter.data_ptr(static_cast<int64_t>(i)));
    const auto strides = iter.strides(static_cast<int64_t>(i));
    for (size_t d = 0; d < shape.size(); ++d) {
      g.strides[d][slot] = strides[d];
    }
  }
  return args;
}

template <typename T, int NARGS>
void set_value(ElementwiseArgs<NARGS>& args, int slot, T value) {
  static_assert(sizeof(T) <= 16, "scalar kernel arguments are at most 16 bytes");
  args.data[slot] = nullptr;
  std::memcpy(args.values[slot].data(), &value, sizeof(T));
}

// The inner loop, type-erased: the iteration code below is compiled once per operand count, not
// once per kernel (a build-time saving across the dozens of kernels; the cost is one indirect call
// per run of contiguous elements). A loop that takes the linear index of its first element
// (random kernels: element i draws from Philox subsequence i) gets it as a fourth argument.
using LoopFn = void (*)(const void* loop, char** ptrs, const int64_t* strides, int64_t n, int64_t first);

template <typename Loop>
void call_loop(const void* erased, char** ptrs, const int64_t* strides, int64_t n, int64_t first) {
  const Loop& loop = *std::launder(static_cast<const Loop*>(erased)); // the bytes copied at launch
  if constexpr (std::is_invocable_v<const Loop&, char**, const int64_t*, int64_t, int64_t>) {
    loop(ptrs, strides, n, first);
  } else {
    loop(ptrs, strides, n);
  }
}

// Device side: calls the loop on (ptrs, inner_strides, n[, first_index]) over elements [begin, end).
template <int NARGS>
void run_range(ElementwiseArgs<NARGS>& args, int64_t begin, int64_t end, LoopFn fn, const void* loop) {
  const auto& g = args.geometry;
  const int ndim = static_cast<int>(g.shape.size());
  std::array<char*, NARGS> ptrs;
  if (ndim == 0) {
    for (int a = 0; a < NARGS; ++a) {
      ptrs[a] = args.base(a);
    }
    const std::array<int64_t, NARGS> zero{};
    fn(loop, ptrs.data(), zero.data(), end - begin, begin);
    return;
  }
  std::array<int64_t, kMaxDims> counter{};
  int64_t rest = begin;
  for (int d = 0; d < ndim; ++d) {
    counter[d] = rest % g.shape[d];
    rest /= g.shape[d];
  }
  for (int64_t i = begin; i < end;) {
    for (int a = 0; a < NARGS; ++a) {
      int64_t offset = 0;
      for (int d = 0; d < ndim; ++d) {
        offset += counter[d] * g.strides[d][a];
      }
      ptrs[a] = args.base(a) + offset;
    }
    const int64_t n = std::min(g.shape[0] - counter[0], end - i);
    fn(loop, ptrs.data(), g.strides[0].data(), n, i);
    i += n;
    counter[0] += n;
    for (int d = 0; d + 1 < ndim && counter[d] == g.shape[d]; ++d) {
      counter[d] = 0;
      ++counter[d + 1];
    }
  }
}

// Device side: runs the loop over all elements, in parallel chunks for large tensors.
template <int NARGS>
void run_elementwise(ElementwiseArgs<NARGS>& args, LoopFn fn, const void* loop) {
  for (char*& data : args.data) {
    data = data != nullptr ? kernel_address(data) : nullptr; // device memory as this kernel sees it
  }
  constexpr int64_t kGrain = 32768;
  const int64_t numel = args.geometry.numel;
  if (numel < 2 * kGrain) {
    run_range(args, 0, numel, fn, loop);
  } else {
    at::parallel_for(0, numel, kGrain, [&](int64_t begin, int64_t end) { run_range(args, begin, end, fn, loop); });
  }
}

// The kernel's argument block: the geometry, the operand pointers, the inner loop's function and the
// loop object itself as bytes (its parameters: an alpha, a Philox seed and offset), copied by value
// at launch as a device copies kernel parameters. With one block type per operand count, the launch
// code (Launch.h) compiles once per operand count instead of once per loop type.
constexpr size_t kMaxLoopBytes = 64;

template <int NARGS>
struct ElementwiseKernel {
  ElementwiseArgs<NARGS> args;
  LoopFn fn;
  alignas(16) unsigned char loop[kMaxLoopBytes];

  void operator()() {
    run_elementwise(args, fn, loop);
  }
};

// Launches `loop` over all elements on the current stream.
template <int NARGS, typename Loop>
void launch_elementwise(ElementwiseArgs<NARGS> args, const Loop& loop) {
  static_assert(std::is_trivially_copyable_v<Loop>, "a loop is copied as bytes into the argument block");
  static_assert(sizeof(Loop) <= kMaxLoopBytes && alignof(Loop) <= 16, "loop parameters exceed kMaxLoopBytes");
  if (args.geometry.numel == 0) {
    return;
  }
  ElementwiseKernel<NARGS> kernel{std::move(args), &call_loop<Loop>, {}};
  std::memcpy(kernel.loop, &loop, sizeof(Loop));
  launch(std::move(kernel));
}

} // namespace torch_foo

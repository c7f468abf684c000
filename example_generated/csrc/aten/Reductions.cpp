// Sums and means on the device: sum and mean over any dimensions (torch.sum, Tensor.mean, a bias's
// gradient, a loss summed or averaged over a batch).
//
// The host wraps the dimensions as PyTorch does (its errors for a dimension out of range or
// repeated), allocates the result and describes, for each element of the result, where its sum
// starts and how its elements follow one another; the operator library (fooOpSum) adds. The
// summed dimensions must be one run in memory (any dimensions of a contiguous tensor that are
// next to each other, or all of them): a bias gradient sums a batch's rows, a loss all its
// elements. Other layouts, integer, complex and 16-bit-to-float (dtype=) sums, and the out=
// variants run on the CPU fallback. A mean is the device's sum divided by the count, as the CPU's.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/EmptyTensor.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/sum_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <bitset>
#include <optional>
#include <vector>

#include "../core/DeviceAllocator.h"
#include "../kernels/native.h"
#include "Fallback.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

// Whether the library sums `self`'s dtype for a dtype= of `dtype` (none, or its own): a floating
// device tensor of at least one dimension. (Its layout is device_sum's to check.)
bool sums_on_device(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  const c10::ScalarType type = self.scalar_type();
  return self.is_privateuseone() && self.dim() != 0 && (!dtype.has_value() || *dtype == type) &&
      c10::isFloatingType(type) && op_dtype(type).has_value();
}

// The sum on the device; nullopt for the cases the fallback computes. `summed_count`, when given, is set
// to the number of elements in each sum.
std::optional<at::Tensor> device_sum(
    const at::Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    std::optional<c10::ScalarType> dtype,
    int64_t* summed_count = nullptr) {
  if (!sums_on_device(self, dtype)) {
    return std::nullopt;
  }
  const c10::ScalarType type = self.scalar_type();
  const int64_t ndim = self.dim();
  std::bitset<at::dim_bitset_size> reduced;
  if (!dim.has_value() || dim->empty()) {
    reduced.set(); // no dimensions named: all of them
  } else {
    reduced = at::dim_list_to_bitset(*dim, ndim); // PyTorch's errors for bad dimensions
  }

  // The summed dimensions, outermost first in memory, must be one run: each one's stride is the
  // next one's stride times its size (dimensions of size 1 do not count).
  std::vector<int64_t> summed;
  int64_t count = 1;
  for (int64_t d = 0; d < ndim; ++d) {
    if (reduced[d]) {
      count *= self.size(d);
      if (self.size(d) != 1) {
        summed.push_back(d);
      }
    }
  }
  if (summed_count != nullptr) {
    *summed_count = count;
  }
  std::sort(summed.begin(), summed.end(), [&](int64_t a, int64_t b) { return self.stride(a) > self.stride(b); });
  for (size_t i = 1; i < summed.size() && count != 0; ++i) {
    if (self.stride(summed[i - 1]) != self.stride(summed[i]) * self.size(summed[i])) {
      return std::nullopt;
    }
  }
  const auto itemsize = static_cast<int64_t>(self.element_size());
  const int64_t stride = summed.empty() ? itemsize : self.stride(summed.back()) * itemsize;

  // The result, contiguous as the CPU's, and the walk over its elements (fastest dimension first).
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < ndim; ++d) {
    if (!reduced[d] || keepdim) {
      shape.push_back(reduced[d] ? 1 : self.size(d));
    }
  }
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::detail::empty_generic(shape, device_allocator(), kDeviceKeys, type, std::nullopt);
  std::vector<int64_t> sizes;
  std::vector<int64_t> in_strides;
  std::vector<int64_t> out_strides;
  for (int64_t d = ndim - 1, o = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (!reduced[d]) {
      sizes.push_back(self.size(d));
      in_strides.push_back(self.stride(d) * itemsize);
      out_strides.push_back(out.stride(o) * itemsize);
    }
    if (!reduced[d] || keepdim) {
      --o;
    }
  }
  if (sizes.size() > FOO_OP_MAX_DIMS) {
    return std::nullopt;
  }
  if (out.numel() == 0) {
    return out;
  }
  if (count == 0) {
    return out.zero_(); // a sum of nothing (the input may have no memory to point at)
  }
  fooIter it{};
  it.ndim = static_cast<int>(sizes.size());
  it.sizes = sizes.data();
  it.noperands = 2;
  it.data[0] = out.data_ptr();
  it.data[1] = const_cast<void*>(self.const_data_ptr());
  it.strides[0] = out_strides.data();
  it.strides[1] = in_strides.data();
  it.dtype[0] = it.dtype[1] = checked_dtype(type);
  const fooError_t error = fooOpSum(&it, count, stride, current_stream());
  if (error == fooErrorNotSupported) {
    return std::nullopt;
  }
  FOO_OP_CHECK(error);
  return out;
}

at::Tensor sum(
    const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
  if (auto result = device_sum(self, dim, keepdim, dtype)) {
    return *result;
  }
  return run_on_cpu<at::_ops::sum_dim_IntList>(self, dim, keepdim, dtype);
}

// The mean on the device as PyTorch's CPU operator computes it: the sum divided by the number of
// summed elements, and for the 16-bit types the sum of the input converted to float, divided in
// float and rounded once (the CPU's accuracy rule for them). nullopt where the sum would run on the
// fallback, or for a dtype= other than the input's.
std::optional<at::Tensor> device_mean(
    const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
  if (!sums_on_device(self, dtype)) {
    return std::nullopt;
  }
  const c10::ScalarType type = self.scalar_type();
  const bool narrow = type == c10::kHalf || type == c10::kBFloat16;
  const at::Tensor input = narrow ? self.to(c10::kFloat) : self;
  int64_t count = 0;
  std::optional<at::Tensor> sum = device_sum(input, dim, keepdim, std::nullopt, &count);
  if (!sum) {
    return std::nullopt;
  }
  sum->div_(count);
  return narrow ? sum->to(type) : *sum;
}

at::Tensor mean(
    const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
  if (auto result = device_mean(self, dim, keepdim, dtype)) {
    return *result;
  }
  return run_on_cpu<at::_ops::mean_dim>(self, dim, keepdim, dtype);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", sum);
  m.impl("mean.dim", mean);
}

} // namespace torch_foo

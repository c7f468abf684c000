// Transfers between pageable host memory and a foo device for code that already knows
// both sides (the CPU fallback, Fallback.cpp): what _copy_from (Copy.cpp) does for them, without a
// trip through the dispatcher for every tensor. A copy to the host is complete when it returns, like
// copy_; a copy to the device returns once the runtime has read the host memory (it may stage the
// bytes), and runs in the current stream's order, like copy_(non_blocking=True) from pageable memory:
// whatever reads the result next is ordered after it, and the host memory can be freed at once.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_foo {

// True when host_copy() and device_copy() move `t` in one transfer: a strided tensor, without
// conjugate or negative bit, whose elements fill their memory. Others go through copy_ (t.cpu(), t.to()).
inline bool copies_in_one_transfer(const at::Tensor& t) {
  return t.layout() == c10::kStrided && !t.is_conj() && !t.is_neg() && t.is_non_overlapping_and_dense();
}

// A CPU tensor with the values, dtype, sizes and (when dense) strides of the device tensor `src`.
at::Tensor host_copy(const at::Tensor& src);

// A tensor on `device` with the values, dtype, sizes and (when dense) strides of the CPU tensor `src`.
at::Tensor device_copy(const at::Tensor& src, c10::Device device);

// dst = src for a device tensor `dst` and a CPU tensor `src` of the same sizes.
void copy_into_device(const at::Tensor& dst, const at::Tensor& src);

} // namespace torch_foo

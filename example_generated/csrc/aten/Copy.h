// Transfers between pageable host memory and a foo device for code that already knows
// both sides (the CPU fallback, Fallback.cpp): what _copy_from (Copy.cpp) does for them, without a
// trip through the dispatcher for every tensor. Complete when they return, like copy_.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_foo {

// A CPU tensor with the values, dtype, sizes and (when dense) strides of the device tensor `src`.
at::Tensor host_copy(const at::Tensor& src);

// A tensor on `device` with the values, dtype, sizes and (when dense) strides of the CPU tensor `src`.
at::Tensor device_copy(const at::Tensor& src, c10::Device device);

// dst = src for a device tensor `dst` and a CPU tensor `src` of the same sizes.
void copy_into_device(const at::Tensor& dst, const at::Tensor& src);

} // namespace torch_foo

// Native activations, powers and optimizer updates: relu and its gradient, sqrt, pow with a number
// exponent, and the optimizers' addcmul, addcdiv and lerp (functional and in place), on the operator library's
// fooOpPointwise. Floating tensors of one dtype on one device run here; every other case
// (integers, mixed dtypes, a complex number argument) runs on the CPU fallback with the caller's
// arguments. A project generated without the native_operators answer has no such file: these
// operators then all run on the fallback.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#ifndef AT_PER_OPERATOR_HEADERS
#define AT_PER_OPERATOR_HEADERS // ATen/ExpandUtils.h: per-operator headers, not ATen/Functions.h
#endif
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>

#include "../kernels/native.h"
#include "Fallback.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

// A number argument as PyTorch's CPU kernels take it for `dtype`: rounded to float for float and the
// 16-bit types (which compute in float), raising PyTorch's error when it does not fit; nullopt for a
// complex number (the fallback raises).
std::optional<double> pointwise_value(c10::ScalarType dtype, const at::Scalar& value) {
  if (value.isComplex()) {
    return std::nullopt;
  }
  return dtype == c10::kDouble ? value.to<double>() : static_cast<double>(value.to<float>());
}

// pow's exponent as PyTorch's CPU operator takes it for a floating `dtype`: a double for float and
// double, rounded to the dtype for the 16-bit types; nullopt for a complex exponent or one the dtype
// cannot hold (the fallback then computes, or raises, as the CPU does).
std::optional<double> pow_exponent(c10::ScalarType dtype, const at::Scalar& exponent) {
  if (exponent.isComplex()) {
    return std::nullopt;
  }
  const double e = exponent.to<double>();
  if (dtype == c10::kHalf || dtype == c10::kBFloat16) {
    if (std::isfinite(e) && std::abs(e) > (dtype == c10::kHalf ? 65504.0 : 3.3895313892515355e38)) {
      return std::nullopt;
    }
    return dtype == c10::kHalf ? static_cast<double>(static_cast<float>(c10::Half(static_cast<float>(e))))
                               : static_cast<double>(static_cast<float>(c10::BFloat16(static_cast<float>(e))));
  }
  return e;
}

// Computes `op` over `inputs` (checked by same_floating_device_tensors) into a new tensor, or into
// `*inplace`. nullopt when the library declines, or when the inputs do not broadcast to *inplace's
// shape (the fallback then raises PyTorch's error): nothing has been written.
template <size_t N>
std::optional<at::Tensor> pointwise(
    fooPointwiseOp op, const std::array<const at::Tensor*, N>& inputs, double value, const at::Tensor* inplace) {
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(true);
  at::Tensor allocated; // the iterator allocates the result (AllocatingIterator) when not in place
  if (inplace != nullptr) {
    at::DimVector shape(inputs[0]->sizes().begin(), inputs[0]->sizes().end());
    for (size_t i = 1; i < N; ++i) {
      shape = at::infer_size_dimvector(shape, inputs[i]->sizes());
    }
    if (at::IntArrayRef(shape) != inplace->sizes()) {
      return std::nullopt;
    }
    config.add_output(*inplace).resize_outputs(false);
  } else {
    config.add_output(allocated);
  }
  for (const at::Tensor* input : inputs) {
    config.add_const_input(*input);
  }
  const c10::Device device = inputs[0]->device();
  const c10::DeviceGuard guard(device);
  const auto compute = [&](const at::TensorIteratorBase& iter) {
    std::array<int, N + 1> slots{};
    std::iota(slots.begin(), slots.end(), 0);
    const OpIter op_iter(iter, slots, static_cast<int>(N + 1));
    fooScalar number{};
    number.real = value;
    return fooOpPointwise(op, op_iter.get(), number, current_stream_on(device.index()));
  };
  if (inplace != nullptr) {
    const at::TensorIterator iter = config.build();
    const fooError_t error = compute(iter);
    if (error == fooErrorNotSupported) {
      return std::nullopt;
    }
    FOO_OP_CHECK(error);
    return *inplace;
  }
  AllocatingIterator iter(device);
  iter.build(config);
  const fooError_t error = compute(iter);
  if (error == fooErrorNotSupported) {
    return std::nullopt;
  }
  FOO_OP_CHECK(error);
  return iter.output();
}

// The functional and in-place variants of a pointwise operator: the library computes it when it
// takes the case (floating tensors of one dtype on one device, a real `number`: threshold, value,
// weight or exponent, or none, as `Value` converts it), else the CPU fallback runs Op with the
// caller's arguments `args`.
template <typename Op, auto Value = pointwise_value, size_t N, typename... Args>
at::Tensor pointwise_functional(
    fooPointwiseOp op, const at::Tensor* const (&operands)[N], const at::Scalar* number, Args&&... args) {
  const std::array<const at::Tensor*, N> inputs = std::to_array(operands);
  if (std::apply([](const auto*... t) { return same_floating_device_tensors(*t...); }, inputs)) {
    const auto value = number == nullptr ? std::optional<double>(0) : Value(inputs[0]->scalar_type(), *number);
    if (value) {
      if (auto result = pointwise<N>(op, inputs, *value, nullptr)) {
        return *result;
      }
    }
  }
  return run_on_cpu<Op>(std::forward<Args>(args)...);
}

// (In place: `self`, the first operand and argument, is the result.)
template <typename Op, auto Value = pointwise_value, size_t N, typename... Rest>
at::Tensor& pointwise_inplace(
    fooPointwiseOp op,
    const at::Tensor* const (&operands)[N],
    const at::Scalar* number,
    at::Tensor& self,
    Rest&&... rest) {
  const std::array<const at::Tensor*, N> inputs = std::to_array(operands);
  if (std::apply([](const auto*... t) { return same_floating_device_tensors(*t...); }, inputs)) {
    const auto value = number == nullptr ? std::optional<double>(0) : Value(self.scalar_type(), *number);
    if (value && pointwise<N>(op, inputs, *value, &self)) {
      return self;
    }
  }
  return run_on_cpu<Op>(self, std::forward<Rest>(rest)...);
}

at::Tensor sqrt(const at::Tensor& self) {
  return pointwise_functional<at::_ops::sqrt>(fooPointwiseSqrt, {&self}, nullptr, self);
}

at::Tensor& sqrt_(at::Tensor& self) {
  return pointwise_inplace<at::_ops::sqrt_>(fooPointwiseSqrt, {&self}, nullptr, self);
}

at::Tensor relu(const at::Tensor& self) {
  return pointwise_functional<at::_ops::relu>(fooPointwiseRelu, {&self}, nullptr, self);
}

at::Tensor& relu_(at::Tensor& self) {
  return pointwise_inplace<at::_ops::relu_>(fooPointwiseRelu, {&self}, nullptr, self);
}

at::Tensor threshold_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold) {
  return pointwise_functional<at::_ops::threshold_backward>(
      fooPointwiseThresholdBackward, {&grad, &self}, &threshold, grad, self, threshold);
}

at::Tensor addcmul(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& value) {
  return pointwise_functional<at::_ops::addcmul>(fooPointwiseAddcmul, {&self, &a, &b}, &value, self, a, b, value);
}

at::Tensor& addcmul_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& value) {
  return pointwise_inplace<at::_ops::addcmul_>(fooPointwiseAddcmul, {&self, &a, &b}, &value, self, a, b, value);
}

at::Tensor addcdiv(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& value) {
  return pointwise_functional<at::_ops::addcdiv>(fooPointwiseAddcdiv, {&self, &a, &b}, &value, self, a, b, value);
}

at::Tensor& addcdiv_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& value) {
  return pointwise_inplace<at::_ops::addcdiv_>(fooPointwiseAddcdiv, {&self, &a, &b}, &value, self, a, b, value);
}

at::Tensor lerp_scalar(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  return pointwise_functional<at::_ops::lerp_Scalar>(fooPointwiseLerp, {&self, &end}, &weight, self, end, weight);
}

at::Tensor& lerp_scalar_(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  return pointwise_inplace<at::_ops::lerp__Scalar>(fooPointwiseLerp, {&self, &end}, &weight, self, end, weight);
}

at::Tensor lerp_tensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  return pointwise_functional<at::_ops::lerp_Tensor>(
      fooPointwiseLerp, {&self, &end, &weight}, nullptr, self, end, weight);
}

at::Tensor& lerp_tensor_(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  return pointwise_inplace<at::_ops::lerp__Tensor>(
      fooPointwiseLerp, {&self, &end, &weight}, nullptr, self, end, weight);
}

// x ** exponent for a real number exponent (a loss's square, a norm's root): floating tensors of a
// dtype the library takes, whose result keeps their dtype; integer tensors, a tensor exponent and
// out= run on the fallback.
constexpr fooPointwiseOp kPow = fooPointwisePow;

at::Tensor pow_tensor_scalar(const at::Tensor& self, const at::Scalar& exponent) {
  return pointwise_functional<at::_ops::pow_Tensor_Scalar, pow_exponent>(kPow, {&self}, &exponent, self, exponent);
}

at::Tensor& pow_tensor_scalar_(at::Tensor& self, const at::Scalar& exponent) {
  return pointwise_inplace<at::_ops::pow__Scalar, pow_exponent>(kPow, {&self}, &exponent, self, exponent);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sqrt", sqrt);
  m.impl("sqrt_", sqrt_);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("threshold_backward", threshold_backward);
  m.impl("addcmul", addcmul);
  m.impl("addcmul_", addcmul_);
  m.impl("addcdiv", addcdiv);
  m.impl("addcdiv_", addcdiv_);
  m.impl("lerp.Scalar", lerp_scalar);
  m.impl("lerp_.Scalar", lerp_scalar_);
  m.impl("lerp.Tensor", lerp_tensor);
  m.impl("lerp_.Tensor", lerp_tensor_);
  m.impl("pow.Tensor_Scalar", pow_tensor_scalar);
  m.impl("pow_.Scalar", pow_tensor_scalar_);
}

} // namespace torch_foo

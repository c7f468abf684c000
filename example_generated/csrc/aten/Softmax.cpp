// Softmax and log-softmax and their gradients on the device: F.softmax, F.log_softmax and
// F.cross_entropy (log-softmax, then nll_loss), over logits that can be the largest tensor of a
// language model's step (tokens times vocabulary).
//
// The host wraps the dimension as PyTorch does (its error for one out of range), allocates the
// result, contiguous as the CPU's, and the operator library (fooOpSoftmax,
// fooOpSoftmaxBackward) computes. The 16-bit-to-float forms (softmax(x, dim, dtype=float32)
// on a half tensor), other dtypes and tensors of more than FOO_OP_MAX_TENSOR_DIMS dimensions run
// on the CPU fallback.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/library.h>

#include <optional>

#include "../core/DeviceAllocator.h"
#include "../kernels/native.h"
#include "Fallback.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

// True when the library computes a softmax of these tensors: on one device, of one floating dtype
// and one shape.
template <typename... Others>
bool native_softmax(const at::Tensor& first, const Others&... others) {
  return first.dim() <= FOO_OP_MAX_TENSOR_DIMS && same_floating_device_tensors(first, others...) &&
      ((others.sizes() == first.sizes()) && ...);
}

at::Tensor empty_like_contiguous(const at::Tensor& t) {
  return at::detail::empty_generic(t.sizes(), device_allocator(), kDeviceKeys, t.scalar_type(), std::nullopt);
}

// The forward pass; nullopt when the library declines (nothing has been written).
std::optional<at::Tensor> softmax_forward(const at::Tensor& self, int64_t dim, bool log) {
  const int64_t wrapped = c10::maybe_wrap_dim(dim, self.dim()); // PyTorch's error for a bad dim
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = empty_like_contiguous(self);
  if (self.numel() == 0) {
    return out;
  }
  const fooTensor input = op_tensor(self);
  fooTensor output = op_tensor(out);
  const int axis = static_cast<int>(wrapped);
  const fooError_t error = fooOpSoftmax(&input, &output, axis, log ? 1 : 0, current_stream());
  if (error == fooErrorNotSupported) {
    return std::nullopt;
  }
  FOO_OP_CHECK(error);
  return out;
}

std::optional<at::Tensor> softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim, bool log) {
  const int64_t wrapped = c10::maybe_wrap_dim(dim, output.dim());
  const c10::DeviceGuard guard(output.device());
  at::Tensor grad_input = empty_like_contiguous(output);
  if (output.numel() == 0) {
    return grad_input;
  }
  const fooTensor g = op_tensor(grad);
  const fooTensor y = op_tensor(output);
  fooTensor result = op_tensor(grad_input);
  const fooError_t error =
      fooOpSoftmaxBackward(&g, &y, &result, static_cast<int>(wrapped), log ? 1 : 0, current_stream());
  if (error == fooErrorNotSupported) {
    return std::nullopt;
  }
  FOO_OP_CHECK(error);
  return grad_input;
}

at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (!half_to_float && native_softmax(self)) {
    if (auto result = softmax_forward(self, dim, false)) {
      return *result;
    }
  }
  return run_on_cpu<at::_ops::_softmax>(self, dim, half_to_float);
}

at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (!half_to_float && native_softmax(self)) {
    if (auto result = softmax_forward(self, dim, true)) {
      return *result;
    }
  }
  return run_on_cpu<at::_ops::_log_softmax>(self, dim, half_to_float);
}

at::Tensor softmax_backward_data(
    const at::Tensor& grad, const at::Tensor& output, int64_t dim, c10::ScalarType input_dtype) {
  if (input_dtype == output.scalar_type() && native_softmax(output, grad)) {
    if (auto result = softmax_backward(grad, output, dim, false)) {
      return *result;
    }
  }
  return run_on_cpu<at::_ops::_softmax_backward_data>(grad, output, dim, input_dtype);
}

at::Tensor log_softmax_backward_data(
    const at::Tensor& grad, const at::Tensor& output, int64_t dim, c10::ScalarType input_dtype) {
  if (input_dtype == output.scalar_type() && native_softmax(output, grad)) {
    if (auto result = softmax_backward(grad, output, dim, true)) {
      return *result;
    }
  }
  return run_on_cpu<at::_ops::_log_softmax_backward_data>(grad, output, dim, input_dtype);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", softmax);
  m.impl("_log_softmax", log_softmax);
  m.impl("_softmax_backward_data", softmax_backward_data);
  m.impl("_log_softmax_backward_data", log_softmax_backward_data);
}

} // namespace torch_foo

// Batch normalization: native_batch_norm, what nn.BatchNorm* runs on this device.
//
// In training mode native_batch_norm updates running_mean and running_var in place, but its schema
// does not declare them as written (a legacy of the operator). The CPU fallback copies back only
// the arguments a schema marks as mutable, so through the fallback the running statistics of the
// device tensors would never change. This kernel calls _native_batch_norm_legit instead, the same
// computation with the mutation declared, which the fallback (or a native kernel registered for
// it) handles correctly. A device with its own batch norm kernel registers it here.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/_native_batch_norm_legit.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <torch/library.h>

#include <tuple>

#include "Fallback.h"

namespace torch_foo {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input,
    const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var,
    bool training,
    double momentum,
    double eps) {
  const bool has_mean = running_mean.has_value() && running_mean->defined();
  const bool has_var = running_var.has_value() && running_var->defined();
  if (has_mean && has_var) {
    // The running statistics are updated in place (declared as Tensor(a!) in this schema).
    at::Tensor mean = *running_mean;
    at::Tensor var = *running_var;
    return at::_native_batch_norm_legit(input, weight, bias, mean, var, training, momentum, eps);
  }
  if (!has_mean && !has_var && training) {
    return at::_native_batch_norm_legit(input, weight, bias, training, momentum, eps);
  }
  // Only one statistic, or evaluation without statistics: the CPU kernel reports the error.
  return run_on_cpu<at::_ops::native_batch_norm>(
      input, weight, bias, running_mean, running_var, training, momentum, eps);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", native_batch_norm);
}

} // namespace torch_foo

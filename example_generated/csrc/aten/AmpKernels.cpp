// Gradient scaling: the two operators torch.amp.GradScaler("foo") runs every step.
//
// _amp_foreach_non_finite_check_and_unscale_ multiplies every gradient by 1/scale and raises a
// flag if any element is inf or NaN; _amp_update_scale_ then halves the scale after a step with
// such a flag (the optimizer step is skipped) or grows it after `growth_interval` clean steps.
// Both read the scale and the flag where they live, in device memory, inside the kernel: the host
// never waits for the device here, which is what keeps GradScaler cheap on an asynchronous device.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../kernels/native.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

void check_scalar(const at::Tensor& t, const char* name, c10::ScalarType dtype, const at::Tensor& like) {
  TORCH_CHECK(t.numel() == 1, name, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == dtype, name, " must be a ", dtype, " tensor, got ", t.scalar_type());
  TORCH_CHECK(t.device() == like.device(), name, " must be on ", like.device(), ", got ", t.device());
}

void non_finite_check_and_unscale_(at::TensorList self, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  if (self.empty()) {
    return;
  }
  TORCH_CHECK(inv_scale.is_privateuseone(), "inv_scale must be a foo tensor.");
  TORCH_CHECK(found_inf.is_privateuseone(), "found_inf must be a foo tensor.");
  check_scalar(inv_scale, "inv_scale", c10::kFloat, found_inf);
  check_scalar(found_inf, "found_inf", c10::kFloat, inv_scale);
  for (const at::Tensor& t : self) {
    TORCH_CHECK(t.device() == found_inf.device(), "all tensors must be on ", found_inf.device(), ", got ", t.device());
    TORCH_CHECK(t.layout() == c10::kStrided, "one of the tensors is not strided.");
    TORCH_CHECK(at::isFloatingType(t.scalar_type()), "one of the tensors does not have a floating point dtype.");
  }
  const c10::DeviceGuard guard(found_inf.device());
  auto* found = found_inf.mutable_data_ptr<float>();
  const auto* inv = inv_scale.const_data_ptr<float>();
  for (const at::Tensor& t : self) {
    if (t.numel() == 0) {
      continue;
    }
    const at::TensorIterator iter = at::TensorIterator::borrowing_nullary_op(t); // read and written in place
    const OpIter op_iter(iter, {0}, 1);
    FOO_OP_CHECK(fooOpUnscale(op_iter.get(), found, inv, current_stream()));
  }
}

at::Tensor& update_scale_(
    at::Tensor& current_scale,
    at::Tensor& growth_tracker,
    const at::Tensor& found_inf,
    double growth_factor,
    double backoff_factor,
    int64_t growth_interval) {
  TORCH_CHECK(current_scale.is_privateuseone(), "current_scale must be a foo tensor.");
  check_scalar(current_scale, "current_scale", c10::kFloat, current_scale);
  check_scalar(growth_tracker, "growth_tracker", c10::kInt, current_scale);
  check_scalar(found_inf, "found_inf", c10::kFloat, current_scale);
  const c10::DeviceGuard guard(current_scale.device());
  FOO_OP_CHECK(fooOpUpdateScale(
      current_scale.mutable_data_ptr<float>(),
      growth_tracker.mutable_data_ptr<int32_t>(),
      found_inf.const_data_ptr<float>(),
      static_cast<float>(growth_factor),
      static_cast<float>(backoff_factor),
      growth_interval,
      current_stream()));
  return current_scale;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", non_finite_check_and_unscale_);
  m.impl("_amp_update_scale_", update_scale_);
}

} // namespace torch_foo

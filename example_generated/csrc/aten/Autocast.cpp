// Autocast: the casting policy torch.autocast("foo", dtype=...) applies.
//
// Inside an autocast region PyTorch adds the AutocastPrivateUse1 dispatch key in front of the
// backend's. Operators registered here cast their floating point arguments before running on the
// device: matmuls and convolutions to the autocast dtype (float16 or bfloat16, lower_precision_fp),
// reductions, norms, losses and pointwise functions that lose accuracy in low precision to float32
// (fp32, fp32_set_opt_dtype, fp32_append_dtype), and operators with several inputs to their widest
// type (promote). The lists are PyTorch's, the ones CUDA uses (ATen/autocast_mode.h); every other
// operator falls through unchanged. A real device with different fast paths edits these lists;
// torch_foo.amp.get_amp_supported_dtype() says which dtypes it accepts.
//
// This file is alone because ATen/autocast_mode.h includes all of ATen (slow to compile: the
// template's docs/build-speed.md).
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_foo {
namespace {

// The operator lists name these types unqualified.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// binary_cross_entropy on probabilities is unsafe in float16 (log of values rounded to 0 or 1), as
// on CUDA: autocast refuses it and points at the safe alternative.
Tensor binary_cross_entropy_banned(
    const Tensor& /*self*/, const Tensor& /*target*/, const std::optional<Tensor>& /*weight*/, int64_t /*reduction*/) {
  TORCH_CHECK(
      false,
      "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast on foo.\n"
      "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
      "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
      "or torch.nn.BCEWithLogitsLoss. binary_cross_entropy_with_logits and BCEWithLogits are\n"
      "safe to autocast.");
}

} // namespace

// Operators without a policy run unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define KERNEL_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define KERNEL_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define KERNEL_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define KERNEL_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(KERNEL_LOWER_PRECISION_FP)
  AT_FORALL_FP32(KERNEL_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(KERNEL_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(KERNEL_PROMOTE)
#undef KERNEL_LOWER_PRECISION_FP
#undef KERNEL_FP32
#undef KERNEL_FP32_SET_OPT_DTYPE
#undef KERNEL_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

} // namespace torch_foo

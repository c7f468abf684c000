// Convolutions: convolution_overrideable and convolution_backward_overrideable.
//
// nn.Conv1d/2d/3d, nn.ConvTranspose* and F.conv* reach a PrivateUse1 backend through these two
// operators (at::_convolution selects ConvBackend::Overrideable for devices it does not know). Their
// default kernels only raise, so the CPU fallback cannot help: a backend must implement them.
// PyTorch has already checked shapes and parameters (and added the batch dimension) when they are
// called. This file registers them and widens complex32; Convolution.h's two functions compute them:
// with the operator library's kernels where the project has them (the native_operators answer),
// else with PyTorch's CPU convolution through the fallback.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>

#include "Convolution.h"

namespace torch_foo {
namespace {

// complex32 (which the library has no type for) is computed in complex64, as CUDA's kernels compute
// it; the CPU's kernels round to half precision between steps instead.
at::Tensor in_complex64(const at::Tensor& t) {
  return t.to(c10::kComplexFloat);
}

at::Tensor convolution(
    const at::Tensor& input,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& bias,
    c10::IntArrayRef stride,
    c10::IntArrayRef padding,
    c10::IntArrayRef dilation,
    bool transposed,
    c10::IntArrayRef output_padding,
    int64_t groups) {
  if (input.scalar_type() == c10::kComplexHalf) {
    const std::optional<at::Tensor> wide_bias =
        bias.has_value() && bias->defined() ? std::optional<at::Tensor>(in_complex64(*bias)) : std::nullopt;
    // Qualified: at::convolution would match too, by argument-dependent lookup.
    return torch_foo::convolution(
               in_complex64(input),
               in_complex64(weight),
               wide_bias,
               stride,
               padding,
               dilation,
               transposed,
               output_padding,
               groups)
        .to(c10::kComplexHalf);
  }
  return run_convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output,
    const at::Tensor& input,
    const at::Tensor& weight,
    c10::IntArrayRef stride,
    c10::IntArrayRef padding,
    c10::IntArrayRef dilation,
    bool transposed,
    c10::IntArrayRef output_padding,
    int64_t groups,
    std::array<bool, 3> output_mask) {
  if (input.scalar_type() == c10::kComplexHalf) {
    auto [gi, gw, gb] = convolution_backward(
        in_complex64(grad_output),
        in_complex64(input),
        in_complex64(weight),
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        output_mask);
    const auto narrow = [](const at::Tensor& t) { return t.defined() ? t.to(c10::kComplexHalf) : t; };
    return {narrow(gi), narrow(gw), narrow(gb)};
  }
  return run_convolution_backward(
      grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

} // namespace torch_foo

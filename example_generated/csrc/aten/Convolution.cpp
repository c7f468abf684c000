// Convolutions: convolution_overrideable and convolution_backward_overrideable.
//
// nn.Conv1d/2d/3d, nn.ConvTranspose* and F.conv* reach a PrivateUse1 backend through these two
// operators (at::_convolution selects ConvBackend::Overrideable for devices it does not know). Their
// default kernels only raise, so the CPU fallback cannot help: a backend must implement them.
// PyTorch has already checked shapes and parameters (and added the batch dimension) when they are
// called. The host allocates the results; a library kernel computes them (LibraryKernels.h: on
// hardware, the vendor's convolution routines).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <vector>

#include "LibraryKernels.h"

namespace torch_foo {
namespace {

struct ConvParams {
  std::vector<int64_t> stride;
  std::vector<int64_t> padding;
  std::vector<int64_t> dilation;
  bool transposed;
  std::vector<int64_t> output_padding;
  int64_t groups;
};

std::vector<int64_t> output_size(const at::Tensor& input, const at::Tensor& weight, const ConvParams& p) {
  std::vector<int64_t> size{input.size(0), p.transposed ? weight.size(1) * p.groups : weight.size(0)};
  for (int64_t d = 0; d < input.dim() - 2; ++d) {
    const int64_t in = input.size(d + 2);
    const int64_t kernel_extent = p.dilation[d] * (weight.size(d + 2) - 1) + 1;
    size.push_back(
        p.transposed ? (in - 1) * p.stride[d] - 2 * p.padding[d] + kernel_extent + p.output_padding[d]
                     : (in + 2 * p.padding[d] - kernel_extent) / p.stride[d] + 1);
  }
  return size;
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
  const ConvParams p{stride.vec(), padding.vec(), dilation.vec(), transposed, output_padding.vec(), groups};
  const c10::DeviceGuard guard(input.device());
  at::Tensor output = at::empty(output_size(input, weight, p), input.options(), input.suggest_memory_format());
  if (output.numel() == 0) {
    return output;
  }
  launch([out = TensorArg(output), in = TensorArg(input), w = TensorArg(weight), b = optional_arg(bias), p]() {
    const LibraryCallGuard library;
    const std::optional<at::Tensor> b_cpu = b ? std::optional<at::Tensor>(b->as_cpu()) : std::nullopt;
    out.as_cpu().copy_(
        at::convolution(
            in.as_cpu(), w.as_cpu(), b_cpu, p.stride, p.padding, p.dilation, p.transposed, p.output_padding, p.groups));
  });
  return output;
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
  const ConvParams p{stride.vec(), padding.vec(), dilation.vec(), transposed, output_padding.vec(), groups};
  const c10::DeviceGuard guard(input.device());
  at::Tensor grad_input = output_mask[0] ? at::empty_like(input) : at::Tensor();
  at::Tensor grad_weight = output_mask[1] ? at::empty_like(weight) : at::Tensor();
  at::Tensor grad_bias = output_mask[2] ? at::empty({grad_output.size(1)}, grad_output.options()) : at::Tensor();
  std::array<std::optional<TensorArg>, 3> results;
  for (size_t i = 0; i < 3; ++i) {
    const at::Tensor& r = i == 0 ? grad_input : (i == 1 ? grad_weight : grad_bias);
    if (r.defined() && r.numel() > 0) {
      results[i] = TensorArg(r);
    }
  }
  if (results[0] || results[1] || results[2]) {
    launch([results, go = TensorArg(grad_output), in = TensorArg(input), w = TensorArg(weight), p, output_mask]() {
      const LibraryCallGuard library;
      const std::vector<int64_t> bias_sizes{go.sizes[1]};
      const auto grads = at::convolution_backward(
          go.as_cpu(),
          in.as_cpu(),
          w.as_cpu(),
          output_mask[2] ? at::OptionalIntArrayRef(bias_sizes) : std::nullopt,
          p.stride,
          p.padding,
          p.dilation,
          p.transposed,
          p.output_padding,
          p.groups,
          output_mask);
      const std::array<const at::Tensor*, 3> computed{&std::get<0>(grads), &std::get<1>(grads), &std::get<2>(grads)};
      for (size_t i = 0; i < 3; ++i) {
        if (results[i]) {
          results[i]->as_cpu().copy_(*computed[i]);
        }
      }
    });
  }
  return {grad_input, grad_weight, grad_bias};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

} // namespace torch_foo

// Convolutions with the operator library's kernels (the native_operators answer; Convolution.h):
// the host allocates the results, the library computes them (fooOpConvolution: on hardware,
// the vendor's convolution routines). A library that answers fooErrorNotSupported (a dtype it
// lacks, or no convolutions at all yet) leaves the case to PyTorch's CPU convolution, through the
// fallback, as ConvolutionOnCpu.cpp computes every case.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution_backward_ops.h>
#include <ATen/ops/convolution_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>

#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include "../kernels/native.h"
#include "Convolution.h"
#include "Fallback.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

struct ConvParams {
  std::vector<int64_t> stride;
  std::vector<int64_t> padding;
  std::vector<int64_t> dilation;
  bool transposed;
  std::vector<int64_t> output_padding;
  int64_t groups;

  fooConvolutionParams op() const {
    fooConvolutionParams p{};
    p.spatial_dims = static_cast<int>(stride.size());
    TORCH_CHECK(p.spatial_dims >= 1 && p.spatial_dims <= 3, "foo convolutions have 1 to 3 spatial dimensions");
    for (int d = 0; d < p.spatial_dims; ++d) {
      p.stride[d] = stride[d];
      p.padding[d] = padding[d];
      p.dilation[d] = dilation[d];
      p.output_padding[d] = d < static_cast<int>(output_padding.size()) ? output_padding[d] : 0;
    }
    p.transposed = transposed ? 1 : 0;
    p.groups = groups;
    return p;
  }
};

fooTensor op_tensor_or_none(const at::Tensor& t) {
  if (t.defined() && t.numel() > 0) {
    return op_tensor(t);
  }
  fooTensor none{};
  return none;
}

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

} // namespace

at::Tensor run_convolution(
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
  const fooConvolutionParams params = p.op();
  const fooTensor in = op_tensor(input);
  const fooTensor w = op_tensor(weight);
  const fooTensor b = op_tensor_or_none(bias.has_value() ? *bias : at::Tensor());
  fooTensor out = op_tensor(output);
  const fooError_t error = fooOpConvolution(&params, &in, &w, &b, &out, current_stream());
  if (error == fooErrorNotSupported) {
    return run_on_cpu<at::_ops::convolution>(
        input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  }
  FOO_OP_CHECK(error);
  return output;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> run_convolution_backward(
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
  std::array<fooTensor, 3> grads{
      op_tensor_or_none(grad_input), op_tensor_or_none(grad_weight), op_tensor_or_none(grad_bias)};
  if (grads[0].data != nullptr || grads[1].data != nullptr || grads[2].data != nullptr) {
    const fooConvolutionParams params = p.op();
    const fooTensor go = op_tensor(grad_output);
    const fooTensor in = op_tensor(input);
    const fooTensor w = op_tensor(weight);
    const fooStream_t stream = current_stream();
    const auto error = fooOpConvolutionBackward(&params, &go, &in, &w, &grads[0], &grads[1], &grads[2], stream);
    if (error == fooErrorNotSupported) {
      const std::vector<int64_t> bias_sizes{grad_output.size(1)};
      return run_on_cpu<at::_ops::convolution_backward>(
          grad_output,
          input,
          weight,
          output_mask[2] ? at::OptionalIntArrayRef(bias_sizes) : std::nullopt,
          stride,
          padding,
          dilation,
          transposed,
          output_padding,
          groups,
          output_mask);
    }
    FOO_OP_CHECK(error);
  }
  return {grad_input, grad_weight, grad_bias};
}

} // namespace torch_foo

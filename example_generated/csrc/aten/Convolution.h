// The convolutions' computation, behind convolution_overrideable and its backward (Convolution.cpp,
// which registers them and widens complex32 first). One file of this directory defines these two:
// with the native_operators answer, the operator library's kernels; without it, PyTorch's CPU
// convolution through the fallback.
#pragma once

#include <array>
#include <optional>
#include <tuple>

#include <ATen/core/Tensor.h>

namespace torch_foo {

// The convolution's output, of the dtype of `input` (which the library or the CPU takes: complex32
// has been widened).
at::Tensor run_convolution(
    const at::Tensor& input,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& bias,
    c10::IntArrayRef stride,
    c10::IntArrayRef padding,
    c10::IntArrayRef dilation,
    bool transposed,
    c10::IntArrayRef output_padding,
    int64_t groups);

// The gradients that output_mask asks for (undefined tensors for the others).
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
    std::array<bool, 3> output_mask);

} // namespace torch_foo

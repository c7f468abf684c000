// The operator library's native operators (the native_operators answer), part of the library
// (kernels.h states its conventions): activations and optimizer updates, sums, gradient scaling,
// matrix products, convolutions and softmax, which csrc/aten's Pointwise.cpp, Reductions.cpp,
// AmpKernels.cpp, Blas.cpp, ConvolutionKernels.cpp and Softmax.cpp call. Without them, those operators
// run on the CPU fallback.
#pragma once

#include <stdint.h>

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

// Activations and optimizer updates, over operands of one floating dtype (Float16, BFloat16, Float32,
// Float64), computed in float for the 16-bit types and rounded once at the end, as PyTorch's CPU
// kernels compute them. Where those kernels multiply and add, they do it in one fused
// multiply-add on processors that have the instruction (the compiler contracts it): a port whose
// results must equal the CPU's follows the same rule.
//  - Sqrt (out, x): sqrt(x) as the CPU computes it: PyTorch's float and double roots come from a
//    vector math library (MKL's) and may be one unit in the last place off the exact root.
//  - Relu (out, x): x < 0 ? 0 : x (a NaN and -0.0 pass through, as torch.relu gives them).
//  - ThresholdBackward (out, grad, x): x <= value ? 0 : grad (relu's gradient for a value of 0).
//  - Addcmul (out, self, a, b): self + (value * a) * b, the last multiply fused with the add.
//  - Addcdiv (out, self, a, b): self + (value * a) / b.
//  - Lerp (out, self, end) with the weight w = value, or (out, self, end, weight) with a weight per
//    element: self + w * (end - self) for |w| < 0.5, else end + (w - 1) * (end - self), each one
//    fused multiply-add (exact at both ends).
//  - Pow (out, x) with the exponent e = value (a double, whatever the dtype): x ** e as PyTorch's CPU
//    operator computes it for each exponent: e == 2 is x * x, 3 is x * x * x, -2 is 1 / (x * x),
//    0.5 the square root (Sqrt's), -0.5 one over it, -1 the reciprocal; any other e the math
//    library's pow (within its error bounds: this one is not an elementary operation). The caller
//    rounds e as the CPU does for the 16-bit types (to the tensor's dtype).
typedef enum fooPointwiseOp {
  fooPointwiseSqrt = 0,
  fooPointwiseRelu = 1,
  fooPointwiseThresholdBackward = 2,
  fooPointwiseAddcmul = 3,
  fooPointwiseAddcdiv = 4,
  fooPointwiseLerp = 5,
  fooPointwisePow = 6,
} fooPointwiseOp;
fooError_t fooOpPointwise(
    fooPointwiseOp op,
    const fooIter* it,
    fooScalar value, // the value, threshold, weight or exponent the operation takes
    fooStream_t stream);

// ---- reductions ---------------------------------------------------------------------------------

// For each position of `it`, out = the sum of `count` elements of in: operands (out, in) of one
// floating dtype, where in is each sum's first element and the next ones follow `stride` bytes
// apart (a sum over a tensor's dimension, or over several that are one in memory). Summed in
// float for the 16-bit types, in blocks as PyTorch's CPU sums a column (16 elements a block, then
// blocks of blocks): as accurate as the CPU's, and equal to it where the CPU walks columns the same
// way (a bias gradient: a batch of rows summed per feature). An empty sum is 0.
fooError_t fooOpSum(const fooIter* it, int64_t count, int64_t stride, fooStream_t stream);

// ---- gradient scaling (torch.amp.GradScaler) ----------------------------------------------------

// Multiplies the one floating operand of `it` in place by *inv_scale and sets *found_inf to 1 if
// any element is infinite or NaN. found_inf and inv_scale are single floats in device memory.
fooError_t fooOpUnscale(
    const fooIter* it,
    float* found_inf, // device memory: set to 1 on an infinite or NaN element
    const float* inv_scale, // device memory: the factor
    fooStream_t stream);

// After a step: halves (backoff) the scale if *found_inf, else grows it after `interval` clean
// steps counted in *tracker. All three are single values in device memory.
fooError_t fooOpUpdateScale(
    float* scale,
    int32_t* tracker,
    const float* found_inf,
    float growth,
    float backoff,
    int64_t interval,
    fooStream_t stream);

// ---- dense math ---------------------------------------------------------------------------------

// c = beta * c + alpha * (a @ b) for matrices (2 dims) or batches of them (3 dims, batch first),
// any strides; one floating dtype. beta == 0 ignores c's contents (NaN included).
fooError_t fooOpGemm(
    const fooTensor* a,
    const fooTensor* b,
    fooTensor* c, // read when beta != 0, then written
    double alpha,
    double beta,
    fooStream_t stream);

typedef struct fooConvolutionParams {
  int spatial_dims; // 1, 2 or 3
  int64_t stride[3];
  int64_t padding[3];
  int64_t dilation[3];
  int64_t output_padding[3]; // transposed only
  int transposed;
  int64_t groups;
} fooConvolutionParams;

// output = conv(input, weight) + bias (bias may have data NULL), PyTorch's layouts: input
// (N, C, *spatial), weight (C_out, C_in / groups, *kernel), or (C_in, C_out / groups, *kernel)
// transposed.
fooError_t fooOpConvolution(
    const fooConvolutionParams* params,
    const fooTensor* input,
    const fooTensor* weight,
    const fooTensor* bias,
    fooTensor* output,
    fooStream_t stream);
// The gradients whose data is not NULL are computed (grad_bias: the sum over all but dimension 1).
fooError_t fooOpConvolutionBackward(
    const fooConvolutionParams* params,
    const fooTensor* grad_output,
    const fooTensor* input,
    const fooTensor* weight,
    fooTensor* grad_input,
    fooTensor* grad_weight,
    fooTensor* grad_bias,
    fooStream_t stream);

// Softmax (log = 0) or log-softmax (log = 1) along dimension `dim` of `input` into `output`: one
// shape, one floating dtype, computed as PyTorch's CPU does (in float for the 16-bit types).
fooError_t fooOpSoftmax(
    const fooTensor* input,
    fooTensor* output,
    int dim,
    int log, // 1: log-softmax
    fooStream_t stream);
// Its gradient: grad_input from grad_output and the forward's output (all of one shape and dtype).
fooError_t fooOpSoftmaxBackward(
    const fooTensor* grad_output,
    const fooTensor* output,
    fooTensor* grad_input,
    int dim,
    int log, // 1: log-softmax
    fooStream_t stream);

#ifdef __cplusplus
} // extern "C"
#endif

// The foo operator library: every computation the backend runs on the device.
//
// This is the second seam between PyTorch integration and hardware (the first is the driver,
// csrc/runtime/runtime.h). It plays the part cuBLAS and cuDNN play for CUDA, or aclnn for Ascend:
// host code in csrc/aten decides what to compute (type promotion, broadcasting, output allocation,
// which kernel) and calls a function here with device pointers, sizes, strides, dtypes and a stream;
// the function launches device work on that stream and returns without waiting. The API is C and
// has no PyTorch includes. csrc/kernels/emulated/ implements it for the emulated device by
// launching kernels through fooLaunchKernel; a hardware port implements the same functions with
// its own kernels (or maps them onto its vendor library) and keeps everything in csrc/aten. The
// example custom operator's kernels are declared in custom_ops.h.
//
// Conventions:
//  - every function returns a fooError_t of the runtime, described by fooOpGetLastErrorMessage();
//    fooErrorNotSupported means "not on this device" (a dtype, a dimension count): the caller then
//    computes another way (the CPU fallback);
//  - pointers named as device pointers are device memory on the stream's device; sizes are in
//    elements, strides of fooIter in bytes, strides of fooTensor in elements;
//  - arguments are checked by the caller (shapes agree, outputs do not overlap inputs unless an
//    operation says so); a kernel that fails on the device reports at the stream's next
//    synchronisation, as any kernel does.
#pragma once

#include <stdint.h>

#include "../runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fooDataType {
  fooBool = 0,
  fooUInt8 = 1,
  fooInt8 = 2,
  fooInt16 = 3,
  fooInt32 = 4,
  fooInt64 = 5,
  fooFloat16 = 6,
  fooBFloat16 = 7,
  fooFloat32 = 8,
  fooFloat64 = 9,
  fooComplex64 = 10, // two float32: real, imaginary
  fooComplex128 = 11,
  fooUInt16 = 12,
  fooUInt32 = 13,
  fooUInt64 = 14,
} fooDataType;

// The one table of the library's dtypes, for code that needs each of them (a switch, a type per
// dtype): X(dtype, element, scalar_type), where `element` is the C++ type the library's kernels hold
// an element in (`half` and `bfloat16` are the implementation's own 16-bit float types) and
// `scalar_type` PyTorch's name for the dtype (an enumerator of c10::ScalarType, and of the stable
// ABI's torch::headeronly::ScalarType), a token only the code that translates expands
// (csrc/aten/OpLibrary.h, the custom operator, the emulated math library): this header names no PyTorch type.
#define FOO_OP_DTYPES(X) \
  X(fooBool, bool, Bool) \
  X(fooUInt8, uint8_t, Byte) \
  X(fooInt8, int8_t, Char) \
  X(fooInt16, int16_t, Short) \
  X(fooInt32, int32_t, Int) \
  X(fooInt64, int64_t, Long) \
  X(fooFloat16, half, Half) \
  X(fooBFloat16, bfloat16, BFloat16) \
  X(fooFloat32, float, Float) \
  X(fooFloat64, double, Double) \
  X(fooComplex64, std::complex<float>, ComplexFloat) \
  X(fooComplex128, std::complex<double>, ComplexDouble) \
  X(fooUInt16, uint16_t, UInt16) \
  X(fooUInt32, uint32_t, UInt32) \
  X(fooUInt64, uint64_t, UInt64)

// The most iteration dimensions (after merging) and operands an elementwise kernel takes.
#define FOO_OP_MAX_DIMS 16
#define FOO_OP_MAX_OPERANDS 4

// An elementwise iteration: every operand is walked over one shape, each with its own byte strides
// (0 broadcasts), as PyTorch's TensorIterator lays it out: dimension 0 varies fastest, outputs come
// first. An operand whose data is NULL is a scalar: its value, in its own dtype, is in `value`.
typedef struct fooIter {
  int ndim; // 0 for a single element
  const int64_t* sizes; // ndim sizes
  int noperands;
  void* data[FOO_OP_MAX_OPERANDS];
  const int64_t* strides[FOO_OP_MAX_OPERANDS]; // ndim byte strides each (unused for scalars)
  fooDataType dtype[FOO_OP_MAX_OPERANDS];
  uint64_t value[FOO_OP_MAX_OPERANDS][2]; // a scalar operand's bytes (at most 16)
} fooIter;

// A strided tensor for operations that need its shape (convolutions, matrix products).
#define FOO_OP_MAX_TENSOR_DIMS 8
typedef struct fooTensor {
  void* data; // device pointer
  fooDataType dtype;
  int ndim;
  int64_t sizes[FOO_OP_MAX_TENSOR_DIMS];
  int64_t strides[FOO_OP_MAX_TENSOR_DIMS]; // in elements, outermost dimension first
} fooTensor;

// A number passed by value: the kernel reads `integer` for integral and boolean dtypes, `real`
// (and `imag` for complex dtypes) for the others, converted to the computation's own type.
typedef struct fooScalar {
  double real;
  double imag;
  int64_t integer;
} fooScalar;

// The details of the last failure of a function of this library on the calling thread (which
// argument, which data type, the runtime's message when a launch failed).
const char* fooOpGetLastErrorMessage(void);

// ---- elementwise --------------------------------------------------------------------------------

// Fills the one operand of `it` with an element whose bytes are `value` (its dtype's size).
fooError_t fooOpFill(const fooIter* it, const void* value, fooStream_t stream);

// Copies operand 1 into operand 0, converting between any two dtypes; `conjugate` takes the complex
// conjugate and `negate` the negative on the way.
fooError_t fooOpCopy(const fooIter* it, int conjugate, int negate, fooStream_t stream);

// out = a + alpha * b, a * b, a / b: three operands of one dtype (out, a, b), computed in float for
// 16-bit floating types and rounded once: a + alpha * b of floating types is a fused multiply-add,
// with alpha as given (PyTorch's kernels round alpha to the operands' dtype first: callers do). A
// scalar b of mul or div may be Float32 when the operands are 16-bit floats: its value is used as it
// is (PyTorch multiplies a bfloat16 tensor by a Python number at float precision). Division of
// integers is not an operation here (PyTorch promotes it).
typedef enum fooBinaryOp { fooBinaryAdd = 0, fooBinaryMul = 1, fooBinaryDiv = 2 } fooBinaryOp;
fooError_t fooOpBinary(fooBinaryOp op, const fooIter* it, fooScalar alpha, fooStream_t stream);

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
typedef enum fooPointwiseOp {
  fooPointwiseSqrt = 0,
  fooPointwiseRelu = 1,
  fooPointwiseThresholdBackward = 2,
  fooPointwiseAddcmul = 3,
  fooPointwiseAddcdiv = 4,
  fooPointwiseLerp = 5,
} fooPointwiseOp;
fooError_t fooOpPointwise(
    fooPointwiseOp op,
    const fooIter* it,
    fooScalar value, // the value, threshold or weight the operation takes
    fooStream_t stream);

// ---- reductions ---------------------------------------------------------------------------------

// For each position of `it`, out = the sum of `count` elements of in: operands (out, in) of one
// floating dtype, where in is each sum's first element and the next ones follow `stride` bytes
// apart (a sum over a tensor's dimension, or over several that are one in memory). Summed in
// float for the 16-bit types, in blocks as PyTorch's CPU sums a column (16 elements a block, then
// blocks of blocks): as accurate as the CPU's, and equal to it where the CPU walks columns the same
// way (a bias gradient: a batch of rows summed per feature). An empty sum is 0.
fooError_t fooOpSum(const fooIter* it, int64_t count, int64_t stride, fooStream_t stream);

// ---- random numbers -----------------------------------------------------------------------------

// Random kernels draw from Philox4x32-10, PyTorch's counter-based generator: a value needs only the
// generator's seed, the offset the host reserved for the launch, and the element's index, so the
// result does not depend on how a device splits the work (element i draws from subsequence
// i / (4 / words), where `words` is the number of 32-bit draws one value takes).
typedef struct fooPhilox {
  uint64_t seed;
  uint64_t offset;
} fooPhilox;

typedef enum fooDistribution {
  fooUniform = 0, // [a, b)
  fooNormal = 1, // mean a, standard deviation b
  fooLogNormal = 2, // exp of a normal with mean a, standard deviation b
  fooExponential = 3, // rate a
  fooGeometric = 4, // success probability a
  fooCauchy = 5, // median a, scale b
  fooBernoulli = 6, // probability a
  fooRandomBits = 7, // random_(): integers from [0, 2^mantissa or type max]
  fooRandomRange = 8, // random_(from, to): base + [0, range)
  fooRandomFullRange = 9, // random_ over the whole int64 range
} fooDistribution;

typedef struct fooRandomArgs {
  fooPhilox philox;
  double a;
  double b;
  uint64_t range; // fooRandomRange
  int64_t base; // fooRandomRange
} fooRandomArgs;

// Fills the one operand of `it` (floating types for continuous distributions, any for the others).
fooError_t fooOpRandom(
    fooDistribution distribution,
    const fooRandomArgs* args, // the generator's state and the distribution's parameters
    const fooIter* it,
    fooStream_t stream);

// out[i] = (u < p[i]): operands (out of any dtype, p of float64).
fooError_t fooOpBernoulliTensor(fooPhilox philox, const fooIter* it, fooStream_t stream);

// Dropout in one pass: mask[i] = (u < keep), out[i] = mask[i] ? in[i] * scale : 0; operands (out,
// mask of bool, in); out and in of one floating dtype.
fooError_t fooOpDropout(
    fooPhilox philox,
    double keep, // the probability of keeping an element
    double scale, // what kept elements are multiplied by (1 / keep)
    const fooIter* it,
    fooStream_t stream);

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

// ---- recurrent cells (contiguous row-major matrices) --------------------------------------------

// LSTM: gates (batch, 4 * hidden) in the order i, f, g, o; biases (4 * hidden) or NULL; states
// (batch, hidden); workspace (batch, 4 * hidden) receives the activated gates for the backward pass.
fooError_t fooOpLstmCell(
    fooDataType dtype,
    int64_t batch,
    int64_t hidden,
    const void* input_gates,
    const void* hidden_gates,
    const void* input_bias,
    const void* hidden_bias,
    const void* cx,
    void* hy,
    void* cy,
    void* workspace,
    fooStream_t stream);
// grad_hy and grad_cy may be NULL (zero).
fooError_t fooOpLstmCellBackward(
    fooDataType dtype,
    int64_t batch,
    int64_t hidden,
    const void* grad_hy,
    const void* grad_cy,
    const void* cx,
    const void* cy,
    const void* workspace,
    void* grad_gates,
    void* grad_cx,
    fooStream_t stream);
// GRU: gates (batch, 3 * hidden) in the order r, z, n; workspace (batch, 5 * hidden).
fooError_t fooOpGruCell(
    fooDataType dtype,
    int64_t batch,
    int64_t hidden,
    const void* input_gates,
    const void* hidden_gates,
    const void* input_bias,
    const void* hidden_bias,
    const void* hx,
    void* hy,
    void* workspace,
    fooStream_t stream);
fooError_t fooOpGruCellBackward(
    fooDataType dtype,
    int64_t batch,
    int64_t hidden,
    const void* grad_hy,
    const void* workspace,
    void* grad_input_gates,
    void* grad_hidden_gates,
    void* grad_hx,
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

// ---- test kernels -------------------------------------------------------------------------------

// Keeps the stream busy for `microseconds` (as torch.cuda._sleep does): tests observe asynchrony.
fooError_t fooOpSleep(int64_t microseconds, fooStream_t stream);
// A kernel that fails on the device with `message`: tests see how a device fault is reported.
fooError_t fooOpTrap(const char* message, fooStream_t stream);

#ifdef __cplusplus
} // extern "C"
#endif

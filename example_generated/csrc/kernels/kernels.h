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
// optional parts of the library have headers of their own beside this one, which come with their
// answers: native_operators (activations, sums, gradient scaling, matrix products, convolutions,
// softmax), kernel_families (attention, histograms, recurrent cells) and custom_op.
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

// ---- test kernels -------------------------------------------------------------------------------

// Keeps the stream busy for `microseconds` (as torch.cuda._sleep does): tests observe asynchrony.
fooError_t fooOpSleep(int64_t microseconds, fooStream_t stream);
// A kernel that fails on the device with `message`: tests see how a device fault is reported.
fooError_t fooOpTrap(const char* message, fooStream_t stream);

#ifdef __cplusplus
} // extern "C"
#endif

// The emulated math library's functions that kernels call on the host (host_math.cpp; the
// native_operators answer).
#pragma once

#include <cstdint>

#include "device.h"

namespace torch_foo::kernels {

// The pointwise operations the emulated device takes from PyTorch's CPU operators, whose results
// come from the CPU's vector math library (MKL's, where PyTorch has it) and so are not always
// correctly rounded:
//  - Sqrt: the CPU's float and double square roots are within one unit in the last place of the
//    exact root, not always equal to it. A model whose optimizer takes square roots (Adam) trains as
//    on the CPU only with the same roots: a parameter whose gradient is rounding noise (a
//    convolution's bias before a batch norm) moves by the sign of that noise.
//  - Pow: in ** value, the pow operator's loops for its special exponents (2, 3, -2, 0.5, -0.5, -1)
//    and the math library's pow for the others; the 16-bit types' exponent rounded to their dtype.
enum class HostUnary { Sqrt, Pow };

// out = op(in) (value: pow's exponent) for n elements of a floating dtype, each operand's `stride`
// bytes apart, by the CPU's operator (host_math.cpp, the emulated math library).
void host_unary(
    const fooEmuKernelContext* ctx,
    HostUnary op,
    double value,
    fooDataType dtype,
    char* out,
    int64_t out_stride,
    const char* in,
    int64_t in_stride,
    int64_t n);

} // namespace torch_foo::kernels

// The emulated math library's functions that kernels call on the host (host_math.cpp; the
// native_operators answer).
#pragma once

#include <cstdint>

#include "device.h"

namespace torch_foo::kernels {

// out = sqrt(in) for n elements of a floating dtype, each operand's `stride` bytes apart, by
// PyTorch's CPU operator (host_math.cpp, the emulated math library). The CPU's float and double
// square roots come from its vector math library (MKL's, where PyTorch has it): within one unit in
// the last place of the exact root, not always equal to it. A model whose optimizer takes square
// roots (Adam) trains as on the CPU only with the same roots: a parameter whose gradient is
// rounding noise (a convolution's bias before a batch norm) moves by the sign of that noise.
void host_sqrt(
    const fooEmuKernelContext* ctx,
    fooDataType dtype,
    char* out,
    int64_t out_stride,
    const char* in,
    int64_t in_stride,
    int64_t n);

// out = in ** exponent, the same way, by PyTorch's CPU pow operator: its vector math library's pow for
// the exponents it has no loop of its own for, and the 16-bit types' exponent rounded to their dtype.
void host_pow(
    const fooEmuKernelContext* ctx,
    fooDataType dtype,
    char* out,
    int64_t out_stride,
    const char* in,
    int64_t in_stride,
    int64_t n,
    double exponent);

} // namespace torch_foo::kernels

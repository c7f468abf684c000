// Histograms of integer tensors, part of the operator library (kernels.h states its conventions):
// torch.histc on uint8 ... int64, which CUDA computes and the CPU does not (csrc/families/WiderDtypeOps.cpp
// calls it).
#pragma once

#include <stdint.h>

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

// output[0 .. bins) = how many elements of `input` fall into each of `bins` equal bins over
// [min, max]: x with min <= x <= max goes to bin floor((x - min) * bins / (max - min)), computed
// exactly in integers, the last bin also holding max. input and output are 1-d, of one dtype of UInt8,
// Int8, Int16, Int32 and Int64 (counts wrap in narrow types, as the device's atomic additions do);
// min < max.
fooError_t fooOpHistogramIntegers(
    const fooTensor* input, int64_t bins, int64_t min, int64_t max, fooTensor* output, fooStream_t stream);

#ifdef __cplusplus
} // extern "C"
#endif

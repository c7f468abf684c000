// The example custom operator's kernels (torch.ops.torch_foo.bias_gelu), part of the operator
// library (kernels.h states its conventions): the pattern for a backend's own fused operators.
#pragma once

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

// out = gelu(x + bias) with the exact (erf) GELU: operands (out, x, bias) of one floating dtype,
// bias broadcast by the caller's strides.
fooError_t fooOpBiasGelu(const fooIter* it, fooStream_t stream);
// grad_x = grad * gelu'(x + bias): operands (grad_x, grad, x, bias).
fooError_t fooOpBiasGeluBackward(const fooIter* it, fooStream_t stream);

#ifdef __cplusplus
} // extern "C"
#endif

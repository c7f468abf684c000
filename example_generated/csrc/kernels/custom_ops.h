// The example custom operator's kernels (torch.ops.torch_foo.bias_gelu), part of the operator
// library (kernels.h states its conventions): the pattern for a backend's own fused operators.
#pragma once

#include <stdint.h>

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

// out = gelu(x + bias) with the exact (erf) GELU: operands (out, x, bias) of one floating dtype,
// bias broadcast by the caller's strides.
fooError_t fooOpBiasGelu(const fooIter* it, fooStream_t stream);
// grad_x = grad * gelu'(x + bias): operands (grad_x, grad, x, bias).
fooError_t fooOpBiasGeluBackward(const fooIter* it, fooStream_t stream);

// ---- for the custom operator library ------------------------------------------------------------
//
// The custom operator library (torch_foo/_custom_ops.so, csrc/custom_ops/CustomOps.cpp) is built on
// PyTorch's stable ABI, a C interface, so that one binary loads on every supported torch release;
// the extension (torch_foo._C) is built per release. The runtime and this operator library live in
// the extension, and a process must have one copy of them (one device memory, one set of streams):
// the custom operator library does not link them, it links the extension and calls them through
// this table of C function pointers, which the extension exports under one C name
// (csrc/custom_ops/Entry.cpp). Nothing of it depends on torch's C++ ABI. A function a custom
// operator needs is added at the end of the table, with the version raised.
// The table's version: the custom operator library refuses a table of an older version.
#define FOO_CUSTOM_OPS_ENTRY_VERSION 1

typedef struct fooCustomOpsEntry {
  uint32_t version; // FOO_CUSTOM_OPS_ENTRY_VERSION of the extension
  uint32_t size; // sizeof(fooCustomOpsEntry) of the extension
  // the kernels above
  fooError_t (*op_bias_gelu)(const fooIter* it, fooStream_t stream);
  fooError_t (*op_bias_gelu_backward)(const fooIter* it, fooStream_t stream);
  // csrc/kernels/kernels.h and csrc/runtime/runtime.h: what a failed call means
  const char* (*op_get_last_error_message)(void);
  const char* (*get_error_string)(fooError_t error);
} fooCustomOpsEntry;

// The table, exported by the extension (csrc/custom_ops/Entry.cpp).
FOO_API const fooCustomOpsEntry* fooCustomOpsGetEntry(void);

#ifdef __cplusplus
} // extern "C"
#endif

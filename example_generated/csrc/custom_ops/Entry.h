// What the custom operator library (_custom_ops.so, CustomOps.cpp) takes from the extension
// (torch_foo._C): the operator library's functions it launches, as one table of C function pointers.
//
// The custom operator library is built on PyTorch's stable ABI (a C interface), so that one binary
// loads on every supported torch release; the extension is built per release (it implements
// PyTorch's C++ interfaces). The device's runtime and operator library live in the extension, and
// one process must have one copy of them (one device memory, one set of streams): the custom operator
// library does not link them, it links the extension and calls them through this table, which the
// extension exports under one C name. The table is C (no torch, no C++ types), so it does not
// depend on torch's C++ ABI either. Add a function of the operator library here when an operator of
// the custom operator library needs it, at the end, and raise the version.
#pragma once

#include <stdint.h>

#include "../kernels/custom_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

// The table's version: the custom operator library refuses a table of an older version.
#define FOO_CUSTOM_OPS_ENTRY_VERSION 1

typedef struct fooCustomOpsEntry {
  uint32_t version; // FOO_CUSTOM_OPS_ENTRY_VERSION of the extension
  uint32_t size; // sizeof(fooCustomOpsEntry) of the extension
  // csrc/kernels/custom_ops.h
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

// Errors: how a failed runtime or operator-library call becomes a Python exception.
//
// FOO_CHECK turns a fooError_t of the runtime into a c10::Error, which PyTorch raises in Python
// as a RuntimeError with the runtime's message and its details (fooGetLastErrorMessage: a failed
// kernel's own message, the driver's text). FOO_OP_CHECK does the same for the operator library
// (csrc/kernels/kernels.h). Out-of-memory has its own path (DeviceAllocator.cpp) so that Python
// sees torch.OutOfMemoryError, as with CUDA. A process forked after the runtime was initialised gets
// PyTorch's wording for that case (CUDA's, with the device name), so that code matching CUDA's
// message ("Cannot re-initialize CUDA in forked subprocess") works unchanged.
#pragma once

#include <c10/util/Exception.h>

#include <cstring>

#include "../kernels/kernels.h"
#include "../runtime/runtime.h"

#define FOO_FORKED_CHILD_MESSAGE \
  "Cannot re-initialize foo in forked subprocess. To use foo with multiprocessing, you must use " \
  "the 'spawn' start method"

namespace torch_foo {

// Raises the error `code` with `detail` (omitted when it says nothing more than the code).
[[noreturn]] inline void raise_error(const char* source, fooError_t code, const char* detail) {
  TORCH_CHECK(code != fooErrorForkedAfterInit, FOO_FORKED_CHILD_MESSAGE);
  const char* summary = fooGetErrorString(code);
  if (detail == nullptr || detail[0] == '\0' || std::strcmp(detail, summary) == 0) {
    TORCH_CHECK(false, source, ": ", summary);
  }
  TORCH_CHECK(false, source, ": ", summary, ": ", detail);
}

} // namespace torch_foo

#define FOO_CHECK(EXPR) \
  do { \
    const fooError_t check_error_ = (EXPR); \
    if (C10_UNLIKELY(check_error_ != fooSuccess)) { \
      ::torch_foo::raise_error("foo runtime error", check_error_, fooGetLastErrorMessage()); \
    } \
  } while (0)

#define FOO_OP_CHECK(EXPR) \
  do { \
    const fooError_t check_error_ = (EXPR); \
    if (C10_UNLIKELY(check_error_ != fooSuccess)) { \
      ::torch_foo::raise_error("foo operator library", check_error_, fooOpGetLastErrorMessage()); \
    } \
  } while (0)

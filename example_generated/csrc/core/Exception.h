// Errors: how a failed runtime call becomes a Python exception.
//
// FOO_CHECK turns a fooError_t into a c10::Error, which PyTorch raises in Python as a
// RuntimeError carrying the runtime's message. Out-of-memory has its own path (DeviceAllocator.cpp)
// so that Python sees torch.OutOfMemoryError, as with CUDA.
#pragma once

#include <c10/util/Exception.h>

#include "../runtime/runtime.h"

#define FOO_CHECK(EXPR) \
  do { \
    const auto check_error_ = (EXPR); \
    TORCH_CHECK(check_error_ == fooSuccess, "foo runtime error: ", fooGetErrorString(check_error_)); \
  } while (0)

// The PyTorch headers nearly every file of the extension includes, compiled once per build into a
// precompiled header that those files start from (PCH=1; cmake/flags.cmake). Parsing
// them is most of a file's compile time; with the precompiled header each file parses only what is
// its own. Code never includes this file: every source includes what it uses, so it builds the same
// without it (PCH=0). Add a header here only if most files include it.
#pragma once

// Files include per-operator headers (ATen/ops/<op>.h), never all of ATen's functions.
#ifndef TORCH_ASSERT_ONLY_METHOD_OPERATORS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#endif

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

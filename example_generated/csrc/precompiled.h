// The PyTorch headers nearly every file of the extension includes, compiled once per build into a
// precompiled header that every torch-using target starts from with PCH=1 (the target
// <name>_precompiled in cmake/flags.cmake). Off by default: with GCC 12, loading it and compiling it
// cost more CPU than the parsing it saves, now that the unity units are few (the template's
// docs/build-speed.md has the numbers). Code never includes this file: every source includes what it
// uses, so it builds the same without it. Add a header here only if most units include it.
//
// No TORCH_ASSERT_ONLY_METHOD_OPERATORS here: the files that define it do so themselves, and the
// files that include all of ATen (Autocast.cpp, the module, the c10d backend) start from this header
// too.
#pragma once

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

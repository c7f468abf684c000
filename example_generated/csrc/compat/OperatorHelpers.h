// Helpers of torch's own CPU kernels that the device's kernels call, so that the device answers as
// the CPU does under every supported torch release (touchpoints of compat/TorchCompat.h):
// at::native::alpha_check and sub_check (csrc/aten/Elementwise.cpp), the type promotion state
// at::native::ResultTypeState (Elementwise.cpp) and at::native::checkSetStorage (csrc/aten/Resize.cpp).
#pragma once

#include "TorchCompat.h"

#if !__has_include(<ATen/native/BinaryOps.h>) || !__has_include(<ATen/native/TypeProperties.h>) \
    || !__has_include(<ATen/native/Resize.h>)
#error "torch_foo: torch moved ATen/native/{BinaryOps,TypeProperties,Resize}.h (see compat/TorchCompat.h)"
#endif

#include <ATen/native/BinaryOps.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>

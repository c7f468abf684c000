// at::native::templates (ATen/native/DistributionTemplates.h), the argument checks and dispatch of
// torch's random operators that csrc/aten/Random.cpp shares with the CPU and CUDA kernels, so that
// the device's errors read the same: a touchpoint of compat/TorchCompat.h. The header needs
// AT_PER_OPERATOR_HEADERS, which Random.cpp defines before its first include.
#pragma once

#include "TorchCompat.h"

#if !__has_include(<ATen/native/DistributionTemplates.h>)
#error "torch_foo: torch moved ATen/native/DistributionTemplates.h (see compat/TorchCompat.h)"
#endif

#include <ATen/native/DistributionTemplates.h>

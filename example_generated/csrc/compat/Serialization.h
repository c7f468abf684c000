// torch::jit::TensorBackendMetaRegistry, the PrivateUse1-only hook that saves a tensor's backend
// metadata with torch.save (csrc/core/BackendMeta.cpp): a touchpoint of compat/TorchCompat.h.
#pragma once

#include "TorchCompat.h"

#include <torch/csrc/jit/serialization/pickler_helper.h>

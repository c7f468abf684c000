// libtorch_python's internals the bindings (csrc/python/Module.cpp) use: touchpoints of
// compat/TorchCompat.h, which says what each is for and which public API is missing.
#pragma once

#include "TorchCompat.h"

#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

// The header that declares installCapturedTracebackPython cannot be included (nlohmann/json); it
// must still exist, or torch moved the function.
#if !__has_include(<torch/csrc/profiler/python/combined_traceback.h>)
#error "torch_foo: torch/csrc/profiler/python/combined_traceback.h is gone (see compat/TorchCompat.h)"
#endif

namespace torch {
// Lets CapturedTraceback read Python frames (libtorch_python; declared in
// torch/csrc/profiler/python/combined_traceback.h, as TORCH_PYTHON_API void()).
void installCapturedTracebackPython();
} // namespace torch

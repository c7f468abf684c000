// PyTorch's PrivateUse1 profiler API and the Kineto interfaces it takes, configured as the torch
// wheels were built (a touchpoint of compat/TorchCompat.h). Include it first: the macros configure
// these headers for the rest of the translation unit (csrc/profiler/CMakeLists.txt compiles the file
// that includes this one first in the profiler's unity unit).
#pragma once

// Kineto's headers declare the interfaces only with USE_KINETO, which the torch wheels are built
// with and do not export. csrc/profiler/CMakeLists.txt adds the kineto include directory.
#define USE_KINETO 1
// Kineto's activities format their metadata with fmt, whose compiled part libtorch does not export:
// fmt's header-only build.
#define FMT_HEADER_ONLY 1

#include "TorchCompat.h"

#if !__has_include(<torch/csrc/profiler/standalone/privateuse1_profiler.h>) || !__has_include(<libkineto.h>)
// The touchpoint "profiler.privateuse1_profiler" of TorchCompat.h: torch moved the header or Kineto's.
#error "torch_foo: no torch/csrc/profiler/standalone/privateuse1_profiler.h or libkineto.h"
#endif

#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <ThreadUtil.h>
#include <libkineto.h>
#include <output_base.h>

#ifndef REGISTER_PRIVATEUSE1_PROFILER
#error "torch_foo: privateuse1_profiler.h no longer defines REGISTER_PRIVATEUSE1_PROFILER (see TorchCompat.h)"
#endif

#pragma once

// The torch release this build compiles against: the one place C++ code asks, so that code which
// differs between the torch releases the backend supports branches here and nowhere else
// (torch_foo/_version.py is the Python side). Usage:
//   #if FOO_TORCH_AT_LEAST(2, 15)
//     ... the 2.15 form ...
//   #else
//     ... the 2.14 form ...
//   #endif

#include <torch/headeronly/version.h>

#define FOO_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace torch_foo {

// "2.15.0": what torch/headeronly/version.h says.
inline constexpr const char kTorchVersion[] = TORCH_VERSION;

} // namespace torch_foo

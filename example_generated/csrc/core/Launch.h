// Kernel launch: how compute reaches the device.
//
// launch() hands a C++ callable to fooLaunchKernel on the current stream. The callable is
// the kernel's argument block: it captures only what a real kernel would receive (raw device
// pointers, sizes, strides, scalars), is moved to the heap, and is destroyed after it ran.
// Host-side validation happens before launch; the body only computes.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "Exception.h"

namespace torch_foo {

// The stream that new work is enqueued on: the default stream of the current device.
inline fooStream_t current_stream() {
  return nullptr;
}

template <typename Body>
void launch(Body&& body, fooStream_t stream = current_stream()) {
  using Kernel = std::decay_t<Body>;
  const fooKernel_t entry = [](void* p) {
    std::unique_ptr<Kernel> kernel(static_cast<Kernel*>(p)); // freed after the run
    (*kernel)();
  };
  auto* args = new Kernel(std::forward<Body>(body));
  const fooError_t error = fooLaunchKernel(entry, args, stream);
  if (error != fooSuccess) {
    delete args; // not enqueued
    FOO_CHECK(error);
  }
}

} // namespace torch_foo

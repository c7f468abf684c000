// Kernel launch: how compute reaches the device.
//
// launch() hands a C++ callable to fooLaunchKernel on the current stream and returns at once; the
// stream runs it after the work queued before it. The callable is the kernel's argument block: it
// captures only what a real kernel would receive (raw device pointers, sizes, strides, scalars),
// never a Tensor or anything else that the host may free or change meanwhile. It is moved to the
// heap and destroyed after it ran. Host-side validation happens before launch; the body only
// computes, and reaches device memory through kernel_address() (strict memory mode keeps device
// pointers inaccessible outside the runtime). An exception in the body is printed and fails the
// stream, which the next synchronisation reports, as a device reports a kernel fault.
#pragma once

#include <cstdio>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "Exception.h"
#include "Stream.h"

namespace torch_foo {

// Inside a kernel: the address through which the kernel reads and writes device memory `ptr`.
template <typename T>
T* kernel_address(T* ptr) {
  return static_cast<T*>(fooKernelAddress(ptr));
}

// Inside a kernel: rewrites each pointer in place with its kernel_address() (null stays null), for
// kernels whose argument block holds several device pointers.
template <typename... T>
void to_kernel_addresses(T*&... ptrs) {
  ((ptrs = kernel_address(ptrs)), ...);
}

template <typename Body>
void launch(Body&& body, fooStream_t stream = current_stream()) {
  using Kernel = std::decay_t<Body>;
  const fooKernel_t entry = [](void* p) -> int {
    std::unique_ptr<Kernel> kernel(static_cast<Kernel*>(p)); // freed after the run
    try {
      (*kernel)();
      return 0;
    } catch (const c10::Error& e) {
      std::fprintf(stderr, "foo kernel failed: %s\n", e.what_without_backtrace());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "foo kernel failed: %s\n", e.what());
    }
    return 1;
  };
  auto* args = new Kernel(std::forward<Body>(body));
  const fooError_t error = fooLaunchKernel(entry, args, stream);
  if (error != fooSuccess) {
    delete args; // not enqueued
    FOO_CHECK(error);
  }
}

} // namespace torch_foo

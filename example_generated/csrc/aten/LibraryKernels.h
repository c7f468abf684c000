// Library kernels: how the emulated device runs operators a real device takes from its own math
// library (convolutions, matrix products, ...).
//
// A hardware backend calls its vendor library here (a cuDNN- or oneDNN-like API) with device
// pointers. The emulated device's "library" is ATen's CPU implementation: a kernel launched on the
// device's stream wraps the device memory of each operand as a CPU tensor (TensorArg::as_cpu) and
// calls the CPU operator on it. Only pointers and geometry are captured, and device memory is
// touched only inside the kernel, as with any other kernel (Launch.h).
#pragma once

#include <optional>
#include <vector>

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "../core/Launch.h"

namespace torch_foo {

// A kernel argument describing one device tensor: its data pointer and geometry.
struct TensorArg {
  void* data = nullptr;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  c10::ScalarType dtype = c10::ScalarType::Float;

  TensorArg() = default;
  explicit TensorArg(const at::Tensor& t)
      : data(const_cast<void*>(t.const_data_ptr())),
        sizes(t.sizes().vec()),
        strides(t.strides().vec()),
        dtype(t.scalar_type()) {}

  // Device side: the same memory as a CPU tensor (no copy).
  at::Tensor as_cpu() const {
    return at::from_blob(kernel_address(data), sizes, strides, at::TensorOptions().dtype(dtype));
  }
};

inline std::optional<TensorArg> optional_arg(const std::optional<at::Tensor>& t) {
  if (t.has_value() && t->defined()) {
    return TensorArg(*t);
  }
  return std::nullopt;
}

// Device side: the library call sees plain tensors, whatever the calling thread's state: no
// autograd recording and no autocast of the CPU operands.
struct LibraryCallGuard {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::autocast_dispatch_keyset};
};

} // namespace torch_foo

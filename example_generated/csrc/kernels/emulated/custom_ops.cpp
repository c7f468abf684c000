// The example custom operator's kernels on the emulated device: bias_gelu and its backward
// (torch.ops.torch_foo.bias_gelu; host side in csrc/custom_ops/CustomOps.cpp).
#include <cmath>

#include "../custom_ops.h"
#include "device.h"

namespace torch_foo::kernels {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752440; // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794; // 1 / sqrt(2 pi)

// out = gelu(x + bias) with the exact (erf) GELU, as torch.nn.functional.gelu.
template <typename T>
struct BiasGeluLoop {
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t) const {
    using M = opmath_t<T>;
    for (int64_t i = 0; i < n; ++i) {
      const M x = static_cast<M>(*reinterpret_cast<const T*>(data[1] + i * strides[1]));
      const M b = static_cast<M>(*reinterpret_cast<const T*>(data[2] + i * strides[2]));
      const M z = x + b;
      const M y = M(0.5) * z * (M(1) + std::erf(z * M(kSqrtHalf)));
      *reinterpret_cast<T*>(data[0] + i * strides[0]) = static_cast<T>(y);
    }
  }
};

// grad_x = grad * gelu'(x + bias), gelu'(z) = Phi(z) + z * phi(z).
template <typename T>
struct BiasGeluBackwardLoop {
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t) const {
    using M = opmath_t<T>;
    for (int64_t i = 0; i < n; ++i) {
      const M g = static_cast<M>(*reinterpret_cast<const T*>(data[1] + i * strides[1]));
      const M x = static_cast<M>(*reinterpret_cast<const T*>(data[2] + i * strides[2]));
      const M b = static_cast<M>(*reinterpret_cast<const T*>(data[3] + i * strides[3]));
      const M z = x + b;
      const M cdf = M(0.5) * (M(1) + std::erf(z * M(kSqrtHalf)));
      const M pdf = std::exp(M(-0.5) * z * z) * M(kInvSqrt2Pi);
      *reinterpret_cast<T*>(data[0] + i * strides[0]) = static_cast<T>(g * (cdf + z * pdf));
    }
  }
};

} // namespace
} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" {

fooError_t fooOpBiasGelu(const fooIter* it, fooStream_t stream) {
  if (it == nullptr || it->noperands != 3) {
    return invalid_argument(__func__);
  }
  return dispatch<Types::Floating>(it->dtype[0], [&](auto tag) {
    return launch_elementwise("bias_gelu", it, 3, BiasGeluLoop<decltype(tag)>{}, stream);
  });
}

fooError_t fooOpBiasGeluBackward(const fooIter* it, fooStream_t stream) {
  if (it == nullptr || it->noperands != 4) {
    return invalid_argument(__func__);
  }
  return dispatch<Types::Floating>(it->dtype[0], [&](auto tag) {
    return launch_elementwise("bias_gelu_backward", it, 4, BiasGeluBackwardLoop<decltype(tag)>{}, stream);
  });
}

} // extern "C"

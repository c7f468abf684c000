// Custom operators: operators of the backend's own namespace, torch.ops.torch_foo.*.
//
// A backend adds operators PyTorch does not have (a fused kernel its hardware runs well) in its
// own namespace. The example is bias_gelu(x, bias) = gelu(x + bias), with bias broadcast along the
// last dimension, a fusion transformer MLPs use, and its backward. This file declares the schemas
// (TORCH_LIBRARY) and registers a foo kernel and a CPU kernel for each; both run one elementwise
// functor, on the device through launch_elementwise (Loops.h) and on the host through
// TensorIterator::for_each. torch_foo/ops.py adds the Python parts: the fake kernels (shapes
// for torch.compile and FakeTensor) and the autograd formula. tests/test_custom_ops.py checks
// all of it with torch.library.opcheck.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <cmath>

#include "Loops.h"

namespace torch_foo {
namespace {

// ---- device code (also run by the CPU kernel) ----------------------------------------------

// out = gelu(x + bias) with the exact (erf) GELU, as torch.nn.functional.gelu.
template <typename scalar_t>
struct BiasGelu {
  void operator()(char** data, const int64_t* strides, int64_t n) const {
    using acc_t = at::opmath_type<scalar_t>;
    for (int64_t i = 0; i < n; ++i) {
      const acc_t x = *reinterpret_cast<const scalar_t*>(data[1] + i * strides[1]);
      const acc_t b = *reinterpret_cast<const scalar_t*>(data[2] + i * strides[2]);
      const acc_t z = x + b;
      const acc_t y = acc_t(0.5) * z * (acc_t(1) + std::erf(z * acc_t(M_SQRT1_2)));
      *reinterpret_cast<scalar_t*>(data[0] + i * strides[0]) = static_cast<scalar_t>(y);
    }
  }
};

// grad_x = grad * gelu'(x + bias), gelu'(z) = Phi(z) + z * phi(z).
template <typename scalar_t>
struct BiasGeluBackward {
  void operator()(char** data, const int64_t* strides, int64_t n) const {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t inv_sqrt_2pi = acc_t(0.5 * M_2_SQRTPI * M_SQRT1_2);
    for (int64_t i = 0; i < n; ++i) {
      const acc_t g = *reinterpret_cast<const scalar_t*>(data[1] + i * strides[1]);
      const acc_t x = *reinterpret_cast<const scalar_t*>(data[2] + i * strides[2]);
      const acc_t b = *reinterpret_cast<const scalar_t*>(data[3] + i * strides[3]);
      const acc_t z = x + b;
      const acc_t cdf = acc_t(0.5) * (acc_t(1) + std::erf(z * acc_t(M_SQRT1_2)));
      const acc_t pdf = std::exp(acc_t(-0.5) * z * z) * inv_sqrt_2pi;
      *reinterpret_cast<scalar_t*>(data[0] + i * strides[0]) = static_cast<scalar_t>(g * (cdf + z * pdf));
    }
  }
};

// ---- host code ----------------------------------------------------------------------------

void check_inputs(const char* op, const at::Tensor& x, const at::Tensor& bias) {
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension");
  TORCH_CHECK(
      bias.dim() == 1 && bias.size(0) == x.size(-1),
      op,
      ": bias must be a vector of size x.size(-1) = ",
      x.size(-1),
      ", got shape ",
      bias.sizes());
  TORCH_CHECK(at::isFloatingType(x.scalar_type()), op, ": x must have a floating point dtype, got ", x.scalar_type());
  TORCH_CHECK(
      x.scalar_type() == bias.scalar_type(),
      op,
      ": x and bias must have one dtype, got ",
      x.scalar_type(),
      " and ",
      bias.scalar_type());
  TORCH_CHECK(
      x.device() == bias.device(), op, ": x and bias must be on one device, got ", x.device(), " and ", bias.device());
}

// Runs a 1-d loop over an iterator's elements on the host (the CPU kernels).
template <int NARGS, typename Loop>
void run_on_host(at::TensorIteratorBase& iter, const Loop& loop) {
  iter.for_each([&](char** base, const int64_t* strides, int64_t size0, int64_t size1) {
    std::array<char*, NARGS> ptrs;
    for (int a = 0; a < NARGS; ++a) {
      ptrs[a] = base[a];
    }
    for (int64_t j = 0; j < size1; ++j) {
      loop(ptrs.data(), strides, size0);
      for (int a = 0; a < NARGS; ++a) {
        ptrs[a] += strides[NARGS + a];
      }
    }
  });
}

// Builds the iterator of out = f(inputs...) with out contiguous and shaped like x.
template <int NARGS, template <typename> class Functor>
at::Tensor elementwise(const at::Tensor& x, std::array<const at::Tensor*, NARGS - 1> inputs) {
  at::Tensor out = at::empty_like(x, c10::MemoryFormat::Contiguous);
  if (out.numel() == 0) {
    return out;
  }
  at::TensorIteratorConfig config;
  config.add_output(out).resize_outputs(false);
  for (const at::Tensor* input : inputs) {
    config.add_const_input(*input);
  }
  at::TensorIterator iter = config.build();
  std::array<int, NARGS> slots{};
  for (int a = 0; a < NARGS; ++a) {
    slots[a] = a;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, x.scalar_type(), "bias_gelu", [&] {
    if (x.is_privateuseone()) {
      const c10::DeviceGuard guard(x.device());
      launch_elementwise(make_args<NARGS>(iter, slots), Functor<scalar_t>{});
    } else {
      run_on_host<NARGS>(iter, Functor<scalar_t>{});
    }
  });
  return out;
}

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias) {
  check_inputs("bias_gelu", x, bias);
  return elementwise<3, BiasGelu>(x, {&x, &bias});
}

at::Tensor bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& bias) {
  check_inputs("bias_gelu_backward", x, bias);
  TORCH_CHECK(grad.sizes() == x.sizes(), "bias_gelu_backward: grad must have the shape of x, got ", grad.sizes());
  TORCH_CHECK(
      grad.scalar_type() == x.scalar_type() && grad.device() == x.device(), "bias_gelu_backward: grad must match x");
  return elementwise<4, BiasGeluBackward>(x, {&grad, &x, &bias});
}

} // namespace

TORCH_LIBRARY(torch_foo, m) {
  m.def("bias_gelu(Tensor x, Tensor bias) -> Tensor");
  m.def("bias_gelu_backward(Tensor grad, Tensor x, Tensor bias) -> Tensor");
}

TORCH_LIBRARY_IMPL(torch_foo, PrivateUse1, m) {
  m.impl("bias_gelu", bias_gelu);
  m.impl("bias_gelu_backward", bias_gelu_backward);
}

TORCH_LIBRARY_IMPL(torch_foo, CPU, m) {
  m.impl("bias_gelu", bias_gelu);
  m.impl("bias_gelu_backward", bias_gelu_backward);
}

} // namespace torch_foo

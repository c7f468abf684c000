// Custom operators: operators of the backend's own namespace, torch.ops.torch_foo.*.
//
// A backend adds operators PyTorch does not have (a fused kernel its hardware runs well) in its
// own namespace. The example is bias_gelu(x, bias) = gelu(x + bias), with bias broadcast along the
// last dimension, a fusion transformer MLPs use, and its backward. This file declares the schemas
// (TORCH_LIBRARY) and registers a foo kernel and a CPU kernel for each: the device kernels are the
// operator library's (fooOpBiasGelu, csrc/kernels/emulated/custom_ops.cpp), the CPU kernels compose
// ATen's own operators. torch_foo/ops.py adds the Python parts: the fake kernels (shapes for
// torch.compile and FakeTensor) and the autograd formula. tests/test_custom_ops.py checks all of it
// with torch.library.opcheck.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>

#include "../aten/OpLibrary.h"
#include "../kernels/custom_ops.h"

namespace torch_foo {
namespace {

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

void check_grad(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& bias) {
  check_inputs("bias_gelu_backward", x, bias);
  TORCH_CHECK(grad.sizes() == x.sizes(), "bias_gelu_backward: grad must have the shape of x, got ", grad.sizes());
  TORCH_CHECK(
      grad.scalar_type() == x.scalar_type() && grad.device() == x.device(), "bias_gelu_backward: grad must match x");
}

// The device kernel of out = f(inputs...), with out contiguous and shaped like x.
template <int NOPERANDS, typename Launch>
at::Tensor on_device(const at::Tensor& x, std::array<const at::Tensor*, NOPERANDS - 1> inputs, const Launch& run) {
  at::Tensor out = at::empty_like(x, c10::MemoryFormat::Contiguous);
  if (out.numel() == 0) {
    return out;
  }
  at::TensorIteratorConfig config;
  config.add_output(out).resize_outputs(false);
  for (const at::Tensor* input : inputs) {
    config.add_const_input(*input);
  }
  const at::TensorIterator iter = config.build();
  std::array<int, NOPERANDS> slots{};
  for (int a = 0; a < NOPERANDS; ++a) {
    slots[a] = a;
  }
  const c10::DeviceGuard guard(x.device());
  const OpIter op_iter(iter, slots, NOPERANDS);
  FOO_OP_CHECK(run(op_iter.get(), current_stream()));
  return out;
}

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias) {
  check_inputs("bias_gelu", x, bias);
  return on_device<3>(x, {&x, &bias}, &fooOpBiasGelu);
}

at::Tensor bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& bias) {
  check_grad(grad, x, bias);
  return on_device<4>(x, {&grad, &x, &bias}, &fooOpBiasGeluBackward);
}

// The CPU kernels: the same mathematics from ATen's CPU operators.
at::Tensor bias_gelu_cpu(const at::Tensor& x, const at::Tensor& bias) {
  check_inputs("bias_gelu", x, bias);
  return at::gelu(at::add(x, bias)).contiguous();
}

at::Tensor bias_gelu_backward_cpu(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& bias) {
  check_grad(grad, x, bias);
  return at::gelu_backward(grad, at::add(x, bias)).contiguous();
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
  m.impl("bias_gelu", bias_gelu_cpu);
  m.impl("bias_gelu_backward", bias_gelu_backward_cpu);
}

} // namespace torch_foo

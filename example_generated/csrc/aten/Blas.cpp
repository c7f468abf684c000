// Matrix products: mm, addmm, bmm and baddbmm (nn.Linear, attention's batched products, their
// gradients).
//
// They are the bulk of a model's arithmetic, so they run on the device instead of the CPU fallback
// (which would copy every operand to the CPU and the result back, each call). The host checks the
// shapes and dtypes as PyTorch's CPU kernels do, allocates the result and lays the bias into it;
// the operator library multiplies (fooOpGemm: on hardware, the vendor's BLAS, as cuBLAS is CUDA's).
// Integer dtypes, complex factors, dtypes the library reports it does not multiply, and the out=
// and in-place variants run on the CPU fallback.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "Fallback.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

// The checks of PyTorch's CPU kernels, with their messages: `batched` products take 3 dimensions.
void check_operands(const at::Tensor& a, const at::Tensor& b, bool batched) {
  const int64_t dims = batched ? 3 : 2;
  TORCH_CHECK(a.dim() == dims, batched ? "batch1 must be a 3D tensor" : "self must be a matrix");
  TORCH_CHECK(b.dim() == dims, batched ? "batch2 must be a 3D tensor" : "mat2 must be a matrix");
  TORCH_CHECK(
      a.scalar_type() == b.scalar_type(),
      "expected m1 and m2 to have the same dtype, but got: ",
      a.dtype(),
      " != ",
      b.dtype());
  TORCH_CHECK(
      a.device() == b.device(),
      "Expected all tensors to be on the same device, but found ",
      a.device(),
      " and ",
      b.device());
  if (batched) {
    TORCH_CHECK(
        b.size(0) == a.size(0) && b.size(1) == a.size(2),
        "Expected size for first two dimensions of batch2 tensor to be: [",
        a.size(0),
        ", ",
        a.size(2),
        "] but got: [",
        b.size(0),
        ", ",
        b.size(1),
        "].");
  } else {
    TORCH_CHECK(
        a.size(1) == b.size(0),
        "mat1 and mat2 shapes cannot be multiplied (",
        a.size(0),
        "x",
        a.size(1),
        " and ",
        b.size(0),
        "x",
        b.size(1),
        ")");
  }
}

// The library reads plain memory: conjugate and negative views are materialised first.
at::Tensor resolved(const at::Tensor& t) {
  return t.resolve_conj().resolve_neg();
}

// Whether the device multiplies these operands: floating and complex dtypes with real factors.
// The rest (integers, whose factors PyTorch checks differently) runs on the CPU fallback.
bool on_device(const at::Tensor& a, const at::Scalar& beta, const at::Scalar& alpha) {
  const c10::ScalarType dtype = a.scalar_type();
  return (at::isFloatingType(dtype) || at::isComplexType(dtype)) && op_dtype(dtype).has_value() && !beta.isComplex() &&
      !alpha.isComplex();
}

// beta * bias + alpha * (a @ b) for (n, k) by (k, m) matrices or batches of them (bias: none when
// not given or beta is 0); nullopt when the library does not multiply this dtype.
std::optional<at::Tensor> product(
    const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias, const at::Scalar& beta, const at::Scalar& alpha) {
  const c10::DeviceGuard guard(a.device());
  const std::vector<int64_t> sizes =
      a.dim() == 3 ? std::vector<int64_t>{a.size(0), a.size(1), b.size(2)} : std::vector<int64_t>{a.size(0), b.size(1)};
  // A bias that does not broadcast raises here, as on the CPU, whatever beta is.
  const std::optional<at::Tensor> expanded = bias != nullptr ? std::optional(bias->expand(sizes)) : std::nullopt;
  const bool add_bias = expanded.has_value() && !beta.equal(0);
  at::Tensor result = at::empty(sizes, a.options());
  if (result.numel() == 0) {
    return result;
  }
  if (add_bias) {
    result.copy_(*expanded);
  }
  if (a.size(-1) == 0) { // an empty sum, as PyTorch's CPU kernel computes it: no product at all
    return add_bias ? result.mul_(beta) : result.zero_();
  }
  const at::Tensor ra = resolved(a);
  const at::Tensor rb = resolved(b);
  const fooTensor ta = op_tensor(ra);
  const fooTensor tb = op_tensor(rb);
  fooTensor tc = op_tensor(result);
  const double factor = alpha.toDouble();
  const double bias_factor = add_bias ? beta.toDouble() : 0.0;
  const fooStream_t stream = current_stream_on(a.get_device());
  const fooError_t error = fooOpGemm(&ta, &tb, &tc, factor, bias_factor, stream);
  if (error == fooErrorNotSupported) {
    return std::nullopt;
  }
  FOO_OP_CHECK(error);
  return result;
}

void check_bias(const at::Tensor& self, const at::Tensor& mat) {
  TORCH_CHECK(
      self.scalar_type() == mat.scalar_type(),
      "self and mat2 must have the same dtype, but got ",
      self.scalar_type(),
      " and ",
      mat.scalar_type());
  TORCH_CHECK(
      self.device() == mat.device(),
      "Expected all tensors to be on the same device, but found ",
      self.device(),
      " and ",
      mat.device());
}

// The product on the device when it multiplies these operands, else operator Op on the CPU
// fallback with `args`, the operator's own arguments.
template <typename Op, typename... Args>
at::Tensor multiply(
    bool batched,
    const at::Tensor& a,
    const at::Tensor& b,
    const at::Tensor* bias,
    const at::Scalar& beta,
    const at::Scalar& alpha,
    const Args&... args) {
  check_operands(a, b, batched);
  if (bias != nullptr) {
    check_bias(*bias, b);
  }
  if (on_device(a, beta, alpha)) {
    if (auto result = product(a, b, bias, beta, alpha)) {
      return *result;
    }
  }
  return run_on_cpu<Op>(args...);
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  return multiply<at::_ops::mm>(false, self, mat2, nullptr, 0, 1, self, mat2);
}

at::Tensor addmm(
    const at::Tensor& self,
    const at::Tensor& mat1,
    const at::Tensor& mat2,
    const at::Scalar& beta,
    const at::Scalar& alpha) {
  return multiply<at::_ops::addmm>(false, mat1, mat2, &self, beta, alpha, self, mat1, mat2, beta, alpha);
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  return multiply<at::_ops::bmm>(true, self, mat2, nullptr, 0, 1, self, mat2);
}

at::Tensor baddbmm(
    const at::Tensor& self,
    const at::Tensor& batch1,
    const at::Tensor& batch2,
    const at::Scalar& beta,
    const at::Scalar& alpha) {
  return multiply<at::_ops::baddbmm>(true, batch1, batch2, &self, beta, alpha, self, batch1, batch2, beta, alpha);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", mm);
  m.impl("addmm", addmm);
  m.impl("bmm", bmm);
  m.impl("baddbmm", baddbmm);
}

} // namespace torch_foo

// Matrix products: mm, addmm, bmm and baddbmm (nn.Linear, attention's batched products, their
// gradients).
//
// They are the bulk of a model's arithmetic, so they run on the device instead of the CPU fallback
// (which would copy every operand to the CPU and the result back, each call). The host checks the
// arguments with PyTorch's own meta function of each operator, the one its CPU kernel runs first (so
// the device raises the CPU's errors under every torch release), allocates the result that function
// describes and lays the bias into it; the operator library multiplies (fooOpGemm: on
// hardware, the vendor's BLAS, as cuBLAS is CUDA's). Integer and mixed dtypes, complex factors,
// dtypes the library reports it does not multiply, and the in-place variants run on the CPU fallback,
// which raises what the CPU raises where the CPU refuses them. The out= variants run on the device
// too: torch.compile's generated code calls them for every product (extern_kernels.mm(a, b, out=buf)),
// which would otherwise leave a compiled model's products to the host.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../compat/StructuredMeta.h"

#include <optional>

#include "../kernels/native.h"
#include "Fallback.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

// Runs Meta, PyTorch's structured meta function of an operator (at::meta::structured_mm, ...), on the
// operator's arguments: it checks them, raising the CPU kernel's errors, and describes the result,
// which it asks this class to allocate (on the operands' device, with the dtype it chooses).
template <typename Meta>
class Checked final : public Meta {
 public:
  template <typename... Args>
  explicit Checked(const Args&... args) {
    this->meta(args...);
  }

  const at::Tensor& maybe_get_output(int64_t /*output_idx*/) override {
    return result_;
  }

  void set_output_raw_strided(
      int64_t /*output_idx*/,
      at::IntArrayRef sizes,
      at::IntArrayRef /*strides_hint*/,
      at::TensorOptions options) override {
    result_ = at::empty(sizes, options);
  }

  // The result the meta function described: allocated, contiguous, not yet written.
  const at::Tensor& result() const {
    return result_;
  }

 private:
  at::Tensor result_;
};

// The device's own rule, which the CPU's kernels leave to the dispatcher: operands on one device.
void check_same_device(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(
      a.device() == b.device(),
      "Expected all tensors to be on the same device, but found ",
      a.device(),
      " and ",
      b.device());
}

// The library reads plain memory: conjugate and negative views are materialised first.
at::Tensor resolved(const at::Tensor& t) {
  return t.resolve_conj().resolve_neg();
}

// Whether the device multiplies these operands: one floating or complex dtype, real factors. The
// rest (integers, mixed dtypes, which the CPU kernel refuses with its own checks) runs on the CPU
// fallback.
bool on_device(
    const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias, const at::Scalar& beta, const at::Scalar& alpha) {
  const c10::ScalarType dtype = a.scalar_type();
  const bool one_dtype = b.scalar_type() == dtype && (bias == nullptr || bias->scalar_type() == dtype);
  return one_dtype && (at::isFloatingType(dtype) || at::isComplexType(dtype)) && op_dtype(dtype).has_value() &&
      !beta.isComplex() && !alpha.isComplex();
}

// result = beta * bias + alpha * (a @ b) for (n, k) by (k, m) matrices or batches of them (bias:
// none when not given or beta is 0); false when the library does not multiply this dtype.
bool product(
    const at::Tensor& result,
    const at::Tensor& a,
    const at::Tensor& b,
    const at::Tensor* bias,
    const at::Scalar& beta,
    const at::Scalar& alpha) {
  const c10::DeviceGuard guard(a.device());
  // A bias that does not broadcast raises here, as on the CPU, whatever beta is.
  const std::optional<at::Tensor> expanded =
      bias != nullptr ? std::optional(bias->expand(result.sizes())) : std::nullopt;
  const bool add_bias = expanded.has_value() && !beta.equal(0);
  if (result.numel() == 0) {
    return true;
  }
  if (add_bias) {
    result.copy_(*expanded);
  }
  if (a.size(-1) == 0) { // an empty sum, as PyTorch's CPU kernel computes it: no product at all
    add_bias ? result.mul_(beta) : result.zero_();
    return true;
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
    return false;
  }
  FOO_OP_CHECK(error);
  return true;
}

// The product on the device when it multiplies these operands, else operator Op on the CPU fallback
// with `args`, the operator's own arguments, once Meta (Op's meta function) has checked them.
template <typename Op, typename Meta, typename... Args>
at::Tensor multiply(
    const at::Tensor& a,
    const at::Tensor& b,
    const at::Tensor* bias,
    const at::Scalar& beta,
    const at::Scalar& alpha,
    const Args&... args) {
  check_same_device(a, b);
  if (bias != nullptr) {
    check_same_device(*bias, b);
  }
  const Checked<Meta> checked(args...);
  if (on_device(a, b, bias, beta, alpha) && product(checked.result(), a, b, bias, beta, alpha)) {
    return checked.result();
  }
  return run_on_cpu<Op>(args...);
}

// Whether a product can write `out` directly: contiguous, of the result's sizes, and sharing no
// memory with an operand (which the product would overwrite before reading it).
bool writes_in_place(
    const at::Tensor& out, const at::Tensor& result, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias) {
  if (out.sizes() != result.sizes() || !out.is_contiguous() || out.numel() == 0) {
    return false;
  }
  for (const at::Tensor* operand : {&a, &b, bias}) {
    if (operand != nullptr && at::get_overlap_status(out, *operand) != at::MemOverlapStatus::No) {
      return false;
    }
  }
  return true;
}

// The out= variant of Op, which torch.compile's generated code calls for every product: the
// product on the device straight into `out` when it can (writes_in_place), else into a new result
// copied into `out` (resized when it is empty; `out` may alias an operand, which the new result
// leaves intact until the copy), when the device multiplies these operands and `out` has their
// dtype; else OutOp on the CPU fallback, which raises the CPU's errors. `args` are the functional
// operator's. Writing `out` directly spares a compiled step an allocation and a copy per product.
template <typename OutOp, typename Meta, typename... Args>
at::Tensor& multiply_into(
    at::Tensor& out,
    const at::Tensor& a,
    const at::Tensor& b,
    const at::Tensor* bias,
    const at::Scalar& beta,
    const at::Scalar& alpha,
    const Args&... args) {
  check_same_device(a, b);
  if (bias != nullptr) {
    check_same_device(*bias, b);
  }
  check_same_device(out, a);
  if (out.scalar_type() == a.scalar_type() && on_device(a, b, bias, beta, alpha)) {
    const Checked<Meta> checked(args...);
    // An out= of another shape and with elements the CPU resizes with a deprecation warning: the
    // fallback gives that warning.
    if (writes_in_place(out, checked.result(), a, b, bias)) {
      return product(out, a, b, bias, beta, alpha) ? out : run_on_cpu<OutOp>(args..., out);
    }
    const bool fits = out.sizes() == checked.result().sizes() || out.numel() == 0;
    if (fits && product(checked.result(), a, b, bias, beta, alpha)) {
      out.resize_(checked.result().sizes());
      out.copy_(checked.result());
      return out;
    }
  }
  return run_on_cpu<OutOp>(args..., out);
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  return multiply<at::_ops::mm, at::meta::structured_mm>(self, mat2, nullptr, 0, 1, self, mat2);
}

at::Tensor addmm(
    const at::Tensor& self,
    const at::Tensor& mat1,
    const at::Tensor& mat2,
    const at::Scalar& beta,
    const at::Scalar& alpha) {
  return multiply<at::_ops::addmm, at::meta::structured_addmm>(
      mat1, mat2, &self, beta, alpha, self, mat1, mat2, beta, alpha);
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  return multiply<at::_ops::bmm, at::meta::structured_bmm>(self, mat2, nullptr, 0, 1, self, mat2);
}

at::Tensor baddbmm(
    const at::Tensor& self,
    const at::Tensor& batch1,
    const at::Tensor& batch2,
    const at::Scalar& beta,
    const at::Scalar& alpha) {
  return multiply<at::_ops::baddbmm, at::meta::structured_baddbmm>(
      batch1, batch2, &self, beta, alpha, self, batch1, batch2, beta, alpha);
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  return multiply_into<at::_ops::mm_out, at::meta::structured_mm>(out, self, mat2, nullptr, 0, 1, self, mat2);
}

at::Tensor& addmm_out(
    const at::Tensor& self,
    const at::Tensor& mat1,
    const at::Tensor& mat2,
    const at::Scalar& beta,
    const at::Scalar& alpha,
    at::Tensor& out) {
  return multiply_into<at::_ops::addmm_out, at::meta::structured_addmm>(
      out, mat1, mat2, &self, beta, alpha, self, mat1, mat2, beta, alpha);
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  return multiply_into<at::_ops::bmm_out, at::meta::structured_bmm>(out, self, mat2, nullptr, 0, 1, self, mat2);
}

at::Tensor& baddbmm_out(
    const at::Tensor& self,
    const at::Tensor& batch1,
    const at::Tensor& batch2,
    const at::Scalar& beta,
    const at::Scalar& alpha,
    at::Tensor& out) {
  return multiply_into<at::_ops::baddbmm_out, at::meta::structured_baddbmm>(
      out, batch1, batch2, &self, beta, alpha, self, batch1, batch2, beta, alpha);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", mm);
  m.impl("addmm", addmm);
  m.impl("bmm", bmm);
  m.impl("baddbmm", baddbmm);
  m.impl("mm.out", mm_out);
  m.impl("addmm.out", addmm_out);
  m.impl("bmm.out", bmm_out);
  m.impl("baddbmm.out", baddbmm_out);
}

} // namespace torch_foo

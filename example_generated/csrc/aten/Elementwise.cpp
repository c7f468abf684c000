// Native elementwise kernels: add, sub, mul, div (functional, in-place and out=), fill_ and zero_.
// Activations and optimizer updates have native kernels of their own with the native_operators answer.
//
// These are the operators a model calls most, written the way a device backend writes them: the
// host decides the result dtype (PyTorch's type promotion), checks devices, broadcasts shapes and
// allocates the output; the operator library (fooOpBinary, fooOpFill) only
// computes. Python numbers (x + 1) travel in the launch instead of as tensors. Dtypes outside the
// native set, and the cases a kernel here does not take (mixed dtypes, out=), run on the CPU
// fallback, so every dtype the CPU supports works.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#ifndef AT_PER_OPERATOR_HEADERS
#define AT_PER_OPERATOR_HEADERS // ATen/ExpandUtils.h: per-operator headers, not ATen/Functions.h
#endif
#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/sub_ops.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/MaybeOwned.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <utility>

#include "../compat/OperatorHelpers.h"
#include "Fallback.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

enum class Kind { Add, Sub, Mul, Div };

struct alignas(16) Bytes16 {
  uint64_t lo;
  uint64_t hi;
};

// ---- host code ----------------------------------------------------------------------------

fooBinaryOp op_of(Kind kind) {
  switch (kind) {
    case Kind::Add:
    case Kind::Sub: return fooBinaryAdd; // a - alpha * b is a + (-alpha) * b: binary()
    case Kind::Mul: return fooBinaryMul;
    case Kind::Div: return fooBinaryDiv;
  }
  TORCH_INTERNAL_ASSERT(false, "unknown binary operation");
}

bool is_cpu_scalar(const at::Tensor& t) {
  return t.is_cpu() && t.dim() == 0;
}

// The dtypes the library's arithmetic (fooOpBinary) takes: those it has a name for (op_dtype) but
// the unsigned types wider than a byte, with which PyTorch's CPU kernels do not compute either.
bool native_dtype(c10::ScalarType t) {
  return op_dtype(t).has_value() && !c10::isBarebonesUnsignedType(t);
}

c10::ScalarType result_dtype(Kind kind, const at::Tensor& a, const at::Tensor& b) {
  at::native::ResultTypeState state = {};
  state = at::native::update_result_type_state(a, state);
  state = at::native::update_result_type_state(b, state);
  c10::ScalarType dtype = at::native::result_type(state);
  if (kind == Kind::Div && c10::isIntegralType(dtype, /*includeBool=*/true)) {
    dtype = c10::typeMetaToScalarType(c10::get_default_dtype()); // true division
  }
  return dtype;
}

// Computes op(a, b) (alpha times b for Add and Sub) into `out`, allocating it when undefined, and returns
// the allocated result (an undefined tensor when it wrote into `out`); nullopt when the operator
// library does not support the case (the caller then runs the CPU fallback).
// `inplace` means out is also an input and must not change shape.
std::optional<at::Tensor> binary(
    Kind kind,
    const at::Tensor& self,
    const at::Tensor& other,
    const at::Scalar& alpha,
    const at::Tensor& out,
    bool inplace) {
  const at::Scalar scale = kind == Kind::Sub ? -alpha : alpha; // times other
  const bool adds = kind == Kind::Add || kind == Kind::Sub;
  const c10::ScalarType dtype = result_dtype(kind, self, other);
  if (adds) {
    at::native::alpha_check(dtype, scale);
  }
  // Borrowed, not copied: a tensor that Python holds alone costs the GIL to copy (torch keeps its
  // Python object alive from the second C++ reference on), much of this function's time (the
  // template's docs/device/performance.md has the measurement).
  auto a = c10::MaybeOwned<at::Tensor>::borrowed(self);
  auto b = c10::MaybeOwned<at::Tensor>::borrowed(other);
  if (!a->is_privateuseone() && !b->is_privateuseone()) {
    a = c10::MaybeOwned<at::Tensor>::owned(a->to(out.device())); // only an out= tensor on the device brought us here
  }
  // Device tensors go through the iterator; a CPU 0-dim tensor (a Python number) becomes a value
  // in the kernel's argument block. Any other CPU tensor fails the iterator's device check.
  const bool a_value = is_cpu_scalar(*a) && b->is_privateuseone();
  const bool b_value = is_cpu_scalar(*b) && a->is_privateuseone();
  if (!a_value && a->scalar_type() != dtype) {
    a = c10::MaybeOwned<at::Tensor>::owned(a->to(dtype));
  }
  if (!b_value && b->scalar_type() != dtype) {
    b = c10::MaybeOwned<at::Tensor>::owned(b->to(dtype));
  }

  auto result = c10::MaybeOwned<at::Tensor>::borrowed(out);
  if (out.defined() && out.scalar_type() != dtype) {
    TORCH_CHECK(
        c10::canCast(dtype, out.scalar_type()),
        "result type ",
        dtype,
        " can't be cast to the desired output type ",
        out.scalar_type());
    result = c10::MaybeOwned<at::Tensor>::owned(at::Tensor()); // compute in `dtype`, then convert into out
  }
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(true).add_output(*result).resize_outputs(!inplace);
  std::array<int, 3> slots{0, 1, 2}; // argument slot of each iterator operand
  size_t operands = 1;
  if (!a_value) {
    config.add_const_input(*a);
    slots[operands++] = 1;
  }
  if (!b_value) {
    config.add_const_input(*b);
    slots[operands++] = 2;
  }
  // The device of the iteration, current from here on: the first operand on the device (the iterator
  // checks that every operand but a number is on it). A result to allocate comes straight from the
  // device allocator (AllocatingIterator), as the CPU's own add allocates.
  const c10::Device device = out.defined() && out.is_privateuseone() ? out.device()
      : a->is_privateuseone()                                        ? a->device()
                                                                     : b->device();
  const c10::DeviceGuard guard(device);
  // Launches on the built iterator and returns as binary() does.
  const auto compute = [&](const at::TensorIteratorBase& iter) -> std::optional<at::Tensor> {
    OpIter op_iter(iter, c10::ArrayRef<int>(slots.data(), operands), 3);
    const fooDataType op_type = checked_dtype(dtype);
    // Numbers as PyTorch's CPU kernels see them: alpha, and a number added, rounded to the result
    // dtype; a number that multiplies or divides bfloat16 or half at float precision (x * 0.1 is not
    // x times 0.1 rounded to bfloat16).
    fooScalar alpha_value{};
    AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(c10::kBool, c10::kHalf, c10::kBFloat16, dtype, "binary", [&] {
      alpha_value = op_scalar(c10::Scalar(scale.to<scalar_t>()));
      if (a_value) {
        op_iter.set_scalar(1, op_type, a->item().to<scalar_t>());
      }
      if (b_value && !adds && at::isReducedFloatingType(dtype)) {
        op_iter.set_scalar(2, fooFloat32, b->item().to<float>());
      } else if (b_value) {
        op_iter.set_scalar(2, op_type, b->item().to<scalar_t>());
      }
    });
    const fooStream_t stream = current_stream_on(device.index());
    const fooError_t error = fooOpBinary(op_of(kind), op_iter.get(), alpha_value, stream);
    if (error == fooErrorNotSupported) {
      return std::nullopt;
    }
    FOO_OP_CHECK(error);

    if (result->defined()) {
      return at::Tensor(); // written into out
    }
    const at::Tensor computed = iter.output();
    if (!out.defined()) {
      return computed;
    }
    if (inplace) {
      TORCH_CHECK(
          out.sizes() == computed.sizes(),
          "output with shape ",
          out.sizes(),
          " doesn't match the broadcast shape ",
          computed.sizes());
    } else if (out.sizes() != computed.sizes()) {
      out.resize_(computed.sizes());
    }
    out.copy_(computed);
    return at::Tensor();
  };
  if (result->defined()) {
    return compute(config.build());
  }
  AllocatingIterator allocating(device);
  allocating.build(config);
  return compute(allocating);
}

bool use_fallback(Kind kind, const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  if (out.defined() && !native_dtype(out.scalar_type())) {
    return true;
  }
  return !native_dtype(result_dtype(kind, self, other));
}

// ---- operator wrappers ----------------------------------------------------------------------

// The three variants of a binary operator: the library computes self op other (alpha times other for
// add and sub) when it takes the case, else the CPU fallback runs Op with the caller's arguments
// (`extra`: alpha, for add and sub).
template <typename Op, typename... Extra>
at::Tensor binary_functional(
    Kind kind, const at::Scalar& alpha, const at::Tensor& self, const at::Tensor& other, const Extra&... extra) {
  if (!use_fallback(kind, self, other, {})) {
    if (auto result = binary(kind, self, other, alpha, {}, false)) {
      return *result;
    }
  }
  return run_on_cpu<Op>(self, other, extra...);
}

template <typename Op, typename... Extra>
at::Tensor& binary_inplace(
    Kind kind, const at::Scalar& alpha, at::Tensor& self, const at::Tensor& other, const Extra&... extra) {
  if (!use_fallback(kind, self, other, self) && binary(kind, self, other, alpha, self, true)) {
    return self;
  }
  return run_on_cpu<Op>(self, other, extra...);
}

template <typename Op, typename... Extra>
at::Tensor& binary_out(
    Kind kind,
    const at::Scalar& alpha,
    const at::Tensor& self,
    const at::Tensor& other,
    at::Tensor& out,
    const Extra&... extra) {
  if (!use_fallback(kind, self, other, out) && binary(kind, self, other, alpha, out, false)) {
    return out;
  }
  return run_on_cpu<Op>(self, other, extra..., out);
}

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return binary_functional<at::_ops::add_Tensor>(Kind::Add, alpha, self, other, alpha);
}

at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return binary_inplace<at::_ops::add__Tensor>(Kind::Add, alpha, self, other, alpha);
}

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  return binary_out<at::_ops::add_out>(Kind::Add, alpha, self, other, out, alpha);
}

// With PyTorch's rules for bool operands.
at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  at::native::sub_check(self, other);
  return binary_functional<at::_ops::sub_Tensor>(Kind::Sub, alpha, self, other, alpha);
}

at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  at::native::sub_check(self, other);
  return binary_inplace<at::_ops::sub__Tensor>(Kind::Sub, alpha, self, other, alpha);
}

at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  at::native::sub_check(self, other);
  return binary_out<at::_ops::sub_out>(Kind::Sub, alpha, self, other, out, alpha);
}

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  return binary_functional<at::_ops::mul_Tensor>(Kind::Mul, 1, self, other);
}

at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  return binary_inplace<at::_ops::mul__Tensor>(Kind::Mul, 1, self, other);
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return binary_out<at::_ops::mul_out>(Kind::Mul, 1, self, other, out);
}

at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  return binary_functional<at::_ops::div_Tensor>(Kind::Div, 1, self, other);
}

at::Tensor& div_(at::Tensor& self, const at::Tensor& other) {
  return binary_inplace<at::_ops::div__Tensor>(Kind::Div, 1, self, other);
}

at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return binary_out<at::_ops::div_out>(Kind::Div, 1, self, other, out);
}

at::Tensor& fill_scalar_(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) {
    return self;
  }
  // The element's bytes, converted on the host.
  Bytes16 bytes{0, 0};
  AT_DISPATCH_V2(
      self.scalar_type(),
      "fill_",
      AT_WRAP([&] {
        const scalar_t v = value.to<scalar_t>();
        std::memcpy(&bytes, &v, sizeof(v));
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX),
      c10::kComplexHalf,
      c10::kHalf,
      c10::kBool,
      c10::kBFloat16,
      AT_EXPAND(AT_FLOAT8_TYPES),
      AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  const c10::DeviceGuard guard(self.device());
  const size_t itemsize = self.element_size();
  if (bytes.lo == 0 && bytes.hi == 0 && self.is_non_overlapping_and_dense()) {
    FOO_CHECK(fooMemsetAsync(self.data_ptr(), 0, self.numel() * itemsize, current_stream()));
    return self;
  }
  const at::TensorIterator iter = at::TensorIteratorConfig()
                                      .set_check_mem_overlap(false)
                                      .check_all_same_dtype(false)
                                      .resize_outputs(false)
                                      .add_output(self)
                                      .build();
  // Filling moves bytes: any dtype of the element's size describes it (float8, complex32, bits).
  OpIter op_iter(iter, {0}, 1);
  op_iter.set_dtype(0, word_dtype(itemsize));
  const fooError_t error = fooOpFill(op_iter.get(), &bytes, current_stream());
  if (error == fooErrorNotSupported) {
    return run_on_cpu<at::_ops::fill__Scalar>(self, value);
  }
  FOO_OP_CHECK(error);
  return self;
}

at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(
      value.dim() == 0,
      "fill_ only supports 0-dimension value tensor but got tensor with ",
      value.dim(),
      " dimensions.");
  return fill_scalar_(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) {
  return fill_scalar_(self, 0);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", add);
  m.impl("add_.Tensor", add_);
  m.impl("add.out", add_out);
  m.impl("sub.Tensor", sub);
  m.impl("sub_.Tensor", sub_);
  m.impl("sub.out", sub_out);
  m.impl("mul.Tensor", mul);
  m.impl("mul_.Tensor", mul_);
  m.impl("mul.out", mul_out);
  m.impl("div.Tensor", div);
  m.impl("div_.Tensor", div_);
  m.impl("div.out", div_out);
  m.impl("fill_.Scalar", fill_scalar_);
  m.impl("fill_.Tensor", fill_tensor_);
  m.impl("zero_", zero_);
}

} // namespace torch_foo

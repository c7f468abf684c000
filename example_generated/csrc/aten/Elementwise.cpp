// Native elementwise kernels: add, sub, mul, div (functional, in-place and out=), fill_ and zero_.
//
// These are the operators a model calls most, written the way a device backend writes them: the
// host decides the result dtype (PyTorch's type promotion), checks devices, broadcasts shapes and
// allocates the output; the device kernel (Loops.h) only computes. Python numbers (x + 1) travel
// in the kernel's argument block instead of as tensors. Dtypes outside the native set run on the
// CPU fallback, so every dtype the CPU supports works.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/sub_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "../core/Exception.h"
#include "Fallback.h"
#include "Loops.h"

namespace torch_foo {
namespace {

enum class Kind { Add, Mul, Div };

// ---- device code --------------------------------------------------------------------------

template <typename T>
struct AddOp {
  at::opmath_type<T> alpha;
  T operator()(T a, T b) const {
    using opmath_t = at::opmath_type<T>;
    return static_cast<T>(static_cast<opmath_t>(a) + alpha * static_cast<opmath_t>(b));
  }
};

template <typename T>
struct MulOp {
  T operator()(T a, T b) const {
    using opmath_t = at::opmath_type<T>;
    return static_cast<T>(static_cast<opmath_t>(a) * static_cast<opmath_t>(b));
  }
};

template <typename T>
struct DivOp {
  T operator()(T a, T b) const {
    using opmath_t = at::opmath_type<T>;
    return static_cast<T>(static_cast<opmath_t>(a) / static_cast<opmath_t>(b));
  }
};

// out = op(a, b) over n elements; fast paths for contiguous operands and a scalar operand.
template <typename T, typename Op>
struct BinaryLoop {
  Op op;
  void operator()(char** data, const int64_t* strides, int64_t n) const {
    constexpr int64_t s = sizeof(T);
    auto* out = reinterpret_cast<T*>(data[0]);
    const auto* a = reinterpret_cast<const T*>(data[1]);
    const auto* b = reinterpret_cast<const T*>(data[2]);
    if (strides[0] == s && strides[1] == s && strides[2] == s) {
      for (int64_t i = 0; i < n; ++i) {
        out[i] = op(a[i], b[i]);
      }
    } else if (strides[0] == s && strides[1] == s && strides[2] == 0) {
      const T bv = *b;
      for (int64_t i = 0; i < n; ++i) {
        out[i] = op(a[i], bv);
      }
    } else if (strides[0] == s && strides[1] == 0 && strides[2] == s) {
      const T av = *a;
      for (int64_t i = 0; i < n; ++i) {
        out[i] = op(av, b[i]);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<T*>(data[0] + i * strides[0]) =
            op(*reinterpret_cast<const T*>(data[1] + i * strides[1]),
               *reinterpret_cast<const T*>(data[2] + i * strides[2]));
      }
    }
  }
};

// Writes one element's bytes over n elements; dtype-agnostic, so fill_ needs no type dispatch.
template <typename Word>
struct FillLoop {
  Word value;
  void operator()(char** data, const int64_t* strides, int64_t n) const {
    if (strides[0] == sizeof(Word)) {
      std::fill_n(reinterpret_cast<Word*>(data[0]), n, value);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Word*>(data[0] + i * strides[0]) = value;
      }
    }
  }
};

struct alignas(16) Bytes16 {
  uint64_t lo;
  uint64_t hi;
};

// ---- host code ----------------------------------------------------------------------------

bool is_cpu_scalar(const at::Tensor& t) {
  return t.is_cpu() && t.dim() == 0;
}

bool native_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool:
    case c10::ScalarType::Byte:
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long:
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Float:
    case c10::ScalarType::Double:
    case c10::ScalarType::ComplexFloat:
    case c10::ScalarType::ComplexDouble: return true;
    default: return false;
  }
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

void check_alpha(c10::ScalarType dtype, const at::Scalar& alpha) {
  TORCH_CHECK(
      !alpha.isBoolean() || dtype == c10::ScalarType::Bool, "Boolean alpha only supported for Boolean results.");
  TORCH_CHECK(
      c10::isFloatingType(dtype) || c10::isComplexType(dtype) || alpha.isIntegral(true),
      "For integral input tensors, argument alpha must not be a floating point number.");
  TORCH_CHECK(
      c10::isComplexType(dtype) || !alpha.isComplex(),
      "For non-complex input tensors, argument alpha must not be a complex number.");
}

void check_sub(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(
      a.scalar_type() != c10::kBool || b.scalar_type() != c10::kBool,
      "Subtraction, the `-` operator, with two bool tensors is not supported. "
      "Use the `^` or `logical_xor()` operator instead.");
  TORCH_CHECK(
      a.scalar_type() != c10::kBool && b.scalar_type() != c10::kBool,
      "Subtraction, the `-` operator, with a bool tensor is not supported. "
      "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
}

// Computes op(a, b) (times alpha for Add) into `out`, allocating it when undefined.
// `inplace` means out is also an input and must not change shape.
at::Tensor binary(
    Kind kind, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor out, bool inplace) {
  const c10::ScalarType dtype = result_dtype(kind, self, other);
  if (kind == Kind::Add) {
    check_alpha(dtype, alpha);
  }
  at::Tensor a = self;
  at::Tensor b = other;
  if (!a.is_privateuseone() && !b.is_privateuseone()) {
    a = a.to(out.device()); // only an out= tensor on the device brought us here
  }
  // Device tensors go through the iterator; a CPU 0-dim tensor (a Python number) becomes a value
  // in the kernel's argument block. Any other CPU tensor fails the iterator's device check.
  const bool a_value = is_cpu_scalar(a) && b.is_privateuseone();
  const bool b_value = is_cpu_scalar(b) && a.is_privateuseone();
  if (!a_value && a.scalar_type() != dtype) {
    a = a.to(dtype);
  }
  if (!b_value && b.scalar_type() != dtype) {
    b = b.to(dtype);
  }

  at::Tensor result = out;
  if (out.defined() && out.scalar_type() != dtype) {
    TORCH_CHECK(
        c10::canCast(dtype, out.scalar_type()),
        "result type ",
        dtype,
        " can't be cast to the desired output type ",
        out.scalar_type());
    result = at::Tensor(); // compute in `dtype`, then convert into out
  }
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(true).add_output(result).resize_outputs(!inplace);
  std::array<int, 3> slots{0, 1, 2}; // argument slot of each iterator operand
  size_t operands = 1;
  if (!a_value) {
    config.add_const_input(a);
    slots[operands++] = 1;
  }
  if (!b_value) {
    config.add_const_input(b);
    slots[operands++] = 2;
  }
  const at::TensorIterator iter = config.build();
  const c10::DeviceGuard guard(iter.device());

  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(c10::kBool, c10::kHalf, c10::kBFloat16, dtype, "binary", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    auto args = make_args<3>(iter, c10::ArrayRef<int>(slots.data(), operands));
    if (a_value) {
      set_value(args, 1, a.item().to<scalar_t>());
    }
    if (b_value) {
      set_value(args, 2, b.item().to<scalar_t>());
    }
    switch (kind) {
      case Kind::Add:
        launch_elementwise(
            std::move(args), BinaryLoop<scalar_t, AddOp<scalar_t>>{AddOp<scalar_t>{alpha.to<opmath_t>()}});
        break;
      case Kind::Mul: launch_elementwise(std::move(args), BinaryLoop<scalar_t, MulOp<scalar_t>>{}); break;
      case Kind::Div:
        if constexpr (std::is_integral_v<scalar_t>) {
          TORCH_INTERNAL_ASSERT(false, "division of integers is promoted to floating point");
        } else {
          launch_elementwise(std::move(args), BinaryLoop<scalar_t, DivOp<scalar_t>>{});
        }
        break;
    }
  });

  if (result.defined()) {
    return out;
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
  return out;
}

bool use_fallback(Kind kind, const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  if (out.defined() && !native_dtype(out.scalar_type())) {
    return true;
  }
  return !native_dtype(result_dtype(kind, self, other));
}

// ---- operator wrappers ----------------------------------------------------------------------

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (use_fallback(Kind::Add, self, other, {})) {
    return run_on_cpu<at::_ops::add_Tensor>(self, other, alpha);
  }
  return binary(Kind::Add, self, other, alpha, {}, false);
}

at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (use_fallback(Kind::Add, self, other, self)) {
    return run_on_cpu<at::_ops::add__Tensor>(self, other, alpha);
  }
  binary(Kind::Add, self, other, alpha, self, true);
  return self;
}

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  if (use_fallback(Kind::Add, self, other, out)) {
    return run_on_cpu<at::_ops::add_out>(self, other, alpha, out);
  }
  binary(Kind::Add, self, other, alpha, out, false);
  return out;
}

// a - alpha * b is a + (-alpha) * b, with PyTorch's rules for bool operands.
at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  check_sub(self, other);
  if (use_fallback(Kind::Add, self, other, {})) {
    return run_on_cpu<at::_ops::sub_Tensor>(self, other, alpha);
  }
  return binary(Kind::Add, self, other, -alpha, {}, false);
}

at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  check_sub(self, other);
  if (use_fallback(Kind::Add, self, other, self)) {
    return run_on_cpu<at::_ops::sub__Tensor>(self, other, alpha);
  }
  binary(Kind::Add, self, other, -alpha, self, true);
  return self;
}

at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  check_sub(self, other);
  if (use_fallback(Kind::Add, self, other, out)) {
    return run_on_cpu<at::_ops::sub_out>(self, other, alpha, out);
  }
  binary(Kind::Add, self, other, -alpha, out, false);
  return out;
}

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  if (use_fallback(Kind::Mul, self, other, {})) {
    return run_on_cpu<at::_ops::mul_Tensor>(self, other);
  }
  return binary(Kind::Mul, self, other, 1, {}, false);
}

at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  if (use_fallback(Kind::Mul, self, other, self)) {
    return run_on_cpu<at::_ops::mul__Tensor>(self, other);
  }
  binary(Kind::Mul, self, other, 1, self, true);
  return self;
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (use_fallback(Kind::Mul, self, other, out)) {
    return run_on_cpu<at::_ops::mul_out>(self, other, out);
  }
  binary(Kind::Mul, self, other, 1, out, false);
  return out;
}

at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  if (use_fallback(Kind::Div, self, other, {})) {
    return run_on_cpu<at::_ops::div_Tensor>(self, other);
  }
  return binary(Kind::Div, self, other, 1, {}, false);
}

at::Tensor& div_(at::Tensor& self, const at::Tensor& other) {
  if (use_fallback(Kind::Div, self, other, self)) {
    return run_on_cpu<at::_ops::div__Tensor>(self, other);
  }
  binary(Kind::Div, self, other, 1, self, true);
  return self;
}

at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (use_fallback(Kind::Div, self, other, out)) {
    return run_on_cpu<at::_ops::div_out>(self, other, out);
  }
  binary(Kind::Div, self, other, 1, out, false);
  return out;
}

at::Tensor& fill_(at::Tensor& self, const at::Scalar& value) {
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
  auto args = make_args<1>(iter, c10::ArrayRef<int>({0}));
  switch (itemsize) {
    case 1: launch_elementwise(std::move(args), FillLoop<uint8_t>{static_cast<uint8_t>(bytes.lo)}); break;
    case 2: launch_elementwise(std::move(args), FillLoop<uint16_t>{static_cast<uint16_t>(bytes.lo)}); break;
    case 4: launch_elementwise(std::move(args), FillLoop<uint32_t>{static_cast<uint32_t>(bytes.lo)}); break;
    case 8: launch_elementwise(std::move(args), FillLoop<uint64_t>{bytes.lo}); break;
    case 16: launch_elementwise(std::move(args), FillLoop<Bytes16>{bytes}); break;
    default: TORCH_CHECK(false, "fill_: unsupported element size ", itemsize);
  }
  return self;
}

at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(
      value.dim() == 0,
      "fill_ only supports 0-dimension value tensor but got tensor with ",
      value.dim(),
      " dimensions.");
  return fill_(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) {
  return fill_(self, 0);
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
  m.impl("fill_.Scalar", fill_);
  m.impl("fill_.Tensor", fill_tensor_);
  m.impl("zero_", zero_);
}

} // namespace torch_foo

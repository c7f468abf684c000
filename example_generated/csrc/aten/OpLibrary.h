// How host code calls the operator library (csrc/kernels/kernels.h): PyTorch's types turned into
// the library's descriptions. Everything here runs on the host and touches no device memory.
//
// An elementwise kernel takes a TensorIterator's geometry as it is (its merged shape and byte
// strides, dimension 0 fastest): the iterator has broadcast the operands, checked devices and
// overlap, and allocated the outputs. Operands that are Python numbers (x + 1) become scalar
// operands whose value travels in the launch.
#pragma once

#include <ATen/EmptyTensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <optional>

#include "../core/DeviceAllocator.h"
#include "../core/Exception.h"
#include "../core/Stream.h"
#include "../kernels/kernels.h"

namespace torch_foo {

// The library's name of a dtype, or nullopt for dtypes it does not take (the CPU fallback runs
// those: float8, complex32, quantized and bit types).
inline std::optional<fooDataType> op_dtype(c10::ScalarType t) {
  switch (t) {
#define FOO_OP_DTYPE(DTYPE, TYPE, SCALAR_TYPE) \
  case c10::ScalarType::SCALAR_TYPE: return DTYPE;
    FOO_OP_DTYPES(FOO_OP_DTYPE)
#undef FOO_OP_DTYPE
    default: return std::nullopt;
  }
}

// The library's dtype of `t`; raises for dtypes it does not take.
inline fooDataType checked_dtype(c10::ScalarType t) {
  const auto dtype = op_dtype(t);
  TORCH_CHECK(dtype.has_value(), "foo has no kernel for dtype ", t, " here");
  return *dtype;
}

// True when the library computes an operation of these tensors: all on one device, of one
// floating dtype it takes. Anything else (integers, complex numbers, mixed dtypes, a CPU tensor)
// belongs to the fallback, which promotes, or raises PyTorch's error, as the CPU does.
template <typename... Others>
bool same_floating_device_tensors(const at::Tensor& first, const Others&... others) {
  const c10::ScalarType dtype = first.scalar_type();
  if (!first.is_privateuseone() || !(c10::isFloatingType(dtype) && op_dtype(dtype).has_value())) {
    return false;
  }
  return ((others.is_privateuseone() && others.device() == first.device() && others.scalar_type() == dtype) && ...);
}

// A TensorIterator that allocates its outputs itself, from the device allocator, as PyTorch's
// structured CPU kernels do, instead of through the dispatcher (at::TensorIterator calls at::empty:
// a dispatch through BackendSelect to the empty kernel of csrc/aten/Factories.cpp, which checks the
// arguments and switches devices again). For iterations whose outputs are all undefined (functional
// operators); an out= or in-place operator passes its outputs to an at::TensorIterator. `current`
// is the device the caller has made current; an output on another device is allocated under a guard.
class AllocatingIterator final : public at::TensorIteratorBase {
 public:
  explicit AllocatingIterator(c10::Device current) : current_(current) {}

  const at::Tensor& maybe_get_output(int64_t index) override {
    return outputs_.at(index);
  }

  void set_output_raw_strided(
      int64_t index, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) override {
    at::Tensor& out = outputs_.at(index);
    TORCH_INTERNAL_ASSERT(!out.defined(), "AllocatingIterator takes no outputs, it allocates them");
    std::optional<c10::DeviceGuard> guard;
    if (options.device() != current_) {
      guard.emplace(options.device());
    }
    const c10::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
    out = strides.empty()
        ? at::detail::empty_generic(sizes, device_allocator(), kDeviceKeys, dtype, options.memory_format_opt())
        : at::detail::empty_strided_generic(sizes, strides, device_allocator(), kDeviceKeys, dtype);
    at::TensorIteratorBase::set_output_raw_strided(index, sizes, strides, options);
  }

 private:
  c10::Device current_;
  std::array<at::Tensor, 2> outputs_;
};

// The geometry of a TensorIterator as the library takes it. The arrays it points to belong to the
// iterator, which must outlive the call. `slots` gives each iterator operand's position among the
// kernel's `noperands` operands; the remaining positions are scalars set with set_scalar().
class OpIter {
 public:
  OpIter(const at::TensorIteratorBase& iter, c10::ArrayRef<int> slots, int noperands) {
    TORCH_INTERNAL_ASSERT(static_cast<int64_t>(slots.size()) == iter.ntensors());
    TORCH_INTERNAL_ASSERT(noperands <= FOO_OP_MAX_OPERANDS);
    std::memset(&it_, 0, sizeof(it_));
    it_.ndim = static_cast<int>(iter.ndim());
    it_.sizes = iter.shape().data();
    it_.noperands = noperands;
    int i = 0;
    for (const int slot : slots) {
      it_.data[slot] = const_cast<void*>(iter.data_ptr(i));
      it_.strides[slot] = iter.strides(i).data();
      const auto dtype = op_dtype(iter.dtype(i));
      it_.dtype[slot] = dtype.value_or(fooUInt8);
      unsupported_[slot] = !dtype.has_value();
      if (!dtype) {
        unsupported_type_ = iter.dtype(i);
      }
      ++i;
    }
  }

  // False if an operand has a dtype the library does not take (set_dtype() may name a stand-in).
  bool supported() const {
    return std::none_of(std::begin(unsupported_), std::end(unsupported_), [](bool u) { return u; });
  }

  // Operand `slot` is described as `dtype` (for kernels that only move bytes, such as fill).
  void set_dtype(int slot, fooDataType dtype) {
    it_.dtype[slot] = dtype;
    unsupported_[slot] = false;
  }

  // Operand `slot` is the number `value`, of the element type T (the operand's dtype).
  template <typename T>
  void set_scalar(int slot, fooDataType dtype, T value) {
    static_assert(sizeof(T) <= sizeof(it_.value[0]), "scalar operands are at most 16 bytes");
    it_.data[slot] = nullptr;
    it_.dtype[slot] = dtype;
    std::memcpy(it_.value[slot], &value, sizeof(T));
  }

  const fooIter* get() const {
    TORCH_CHECK(supported(), "foo has no kernel for dtype ", unsupported_type_, " here");
    return &it_;
  }

 private:
  fooIter it_;
  bool unsupported_[FOO_OP_MAX_OPERANDS] = {};
  c10::ScalarType unsupported_type_ = c10::ScalarType::Undefined;
};

// A dtype of the library with elements of `itemsize` bytes, for kernels that only move elements
// (fill, a copy between tensors of one dtype): it describes any dtype of that size, those the
// library does not compute with included (float8, complex32, bits).
inline fooDataType word_dtype(size_t itemsize) {
  switch (itemsize) {
    case 1: return fooUInt8;
    case 2: return fooUInt16;
    case 4: return fooUInt32;
    case 8: return fooUInt64;
    case 16: return fooComplex128;
    default: TORCH_CHECK(false, "foo: no element type of ", itemsize, " bytes");
  }
}

// A tensor as the library describes it (at most FOO_OP_MAX_TENSOR_DIMS dimensions).
inline fooTensor op_tensor(const at::Tensor& t) {
  fooTensor d{};
  TORCH_CHECK(
      t.dim() <= FOO_OP_MAX_TENSOR_DIMS,
      "the foo operator library takes at most ",
      FOO_OP_MAX_TENSOR_DIMS,
      " dimensions");
  d.data = const_cast<void*>(t.const_data_ptr());
  d.dtype = checked_dtype(t.scalar_type());
  d.ndim = static_cast<int>(t.dim());
  for (int i = 0; i < d.ndim; ++i) {
    d.sizes[i] = t.size(i);
    d.strides[i] = t.stride(i);
  }
  return d;
}

// A number for the library, converted as PyTorch converts a Scalar argument.
inline fooScalar op_scalar(const at::Scalar& s) {
  fooScalar v{};
  if (s.isComplex()) {
    const auto c = s.toComplexDouble();
    v.real = c.real();
    v.imag = c.imag();
  } else if (s.isFloatingPoint()) {
    v.real = s.toDouble();
  } else {
    v.integer = s.toLong();
    v.real = static_cast<double>(v.integer);
  }
  return v;
}

} // namespace torch_foo

// CUDA's dtype coverage on the CPU fallback: a table of the dtypes that CUDA's kernels accept and
// the CPU's do not, and the wider dtype the CPU kernel computes in instead.
//
// Code written for accelerators uses what CUDA supports. Through the plain CPU fallback, an
// operator on a dtype the CPU kernel lacks fails on this device ("abs_cpu" not implemented for
// 'Bool', "avg_pool3d_out_frame" not implemented for 'BFloat16', ...). For the operators listed
// below, the fallback converts the arguments of the narrow dtype to a wider one that holds each of
// their values exactly, runs the CPU kernel, and converts the new results back: the CUDA kernels of
// these operators compute in that wider dtype too (float for half and bfloat16, complex64 for
// complex32), so the results are CUDA's up to the rounding order inside the kernel.
//
// The table is checked against PyTorch's OpInfo database by tests/test_dtype_coverage.py: every
// operator whose CUDA dtypes are wider than its CPU dtypes runs on this device in those dtypes,
// through this table or a path of its own (WiderDtypeOps.cpp: histc of integers, FFTs of half
// tensors, nansum of complex tensors). A real device lists here the operators its own kernels
// lack, or implements them.
//
// run_widened fills the fallback's runner seam (csrc/aten/Fallback.h): the fallback offers it every
// operator it runs, and it takes those whose arguments hold a dtype of the table. `cpu_key` is the
// CPU kernel's key (CPU, or SparseCPU / SparseCsrCPU for sparse arguments).
#include <algorithm>
#include <bitset>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/ScalarType.h>
#include <c10/util/SmallVector.h>

#include "../aten/Fallback.h"

namespace torch_foo {
namespace {

using c10::ScalarType;

struct Widening {
  ScalarType from;
  ScalarType to;
};

// Any operator (CUDA computes every complex32 operator in complex64 arithmetic; the CPU has
// complex32 storage, copies and a few arithmetic kernels).
constexpr Widening kEveryOperator[] = {Widening{ScalarType::ComplexHalf, ScalarType::ComplexFloat}};

// Operators by name (every overload: functional, in-place, out=), from the audit of op_db.
const std::unordered_map<std::string, std::vector<Widening>>& operator_widenings() {
  static const auto* table = [] {
    const std::vector<Widening> half_and_bfloat16 = {
        {ScalarType::Half, ScalarType::Float},
        {ScalarType::BFloat16, ScalarType::Float},
    };
    const std::vector<Widening> half = {Widening{ScalarType::Half, ScalarType::Float}};
    // float holds every value of each float8 format exactly.
    const std::vector<Widening> float8 = {
        {ScalarType::Float8_e4m3fn, ScalarType::Float},
        {ScalarType::Float8_e4m3fnuz, ScalarType::Float},
        {ScalarType::Float8_e5m2, ScalarType::Float},
        {ScalarType::Float8_e5m2fnuz, ScalarType::Float},
    };
    // abs of a bool is the identity and trace sums it to int64; uint8 holds both values.
    const std::vector<Widening> bool_as_byte = {Widening{ScalarType::Bool, ScalarType::Byte}};
    return new std::unordered_map<std::string, std::vector<Widening>>{
        {"aten::abs", bool_as_byte},
        {"aten::trace", bool_as_byte},
        {"aten::avg_pool3d", half_and_bfloat16},
        {"aten::avg_pool3d_backward", half_and_bfloat16},
        {"aten::_upsample_bilinear2d_aa", half_and_bfloat16},
        {"aten::_upsample_bilinear2d_aa_backward", half_and_bfloat16},
        {"aten::multi_margin_loss", half_and_bfloat16},
        {"aten::multi_margin_loss_backward", half_and_bfloat16},
        {"aten::multilabel_margin_loss_forward", half_and_bfloat16},
        {"aten::multilabel_margin_loss_backward", half_and_bfloat16},
        {"aten::rrelu_with_noise", half},
        // The CPU has half kernels for these, but computes in half precision between steps
        // (OpInfo lists half as CUDA-only for them); CUDA computes in float.
        {"aten::polygamma", half},
        {"aten::round", half},
        // CUDA has sampled_addmm of half and bfloat16 sparse matrices, and transforms bfloat16
        // signals under torch.stft in float (the complex result stays complex64, as there is no
        // complex bfloat16).
        {"aten::sparse_sampled_addmm", half_and_bfloat16},
        {"aten::_fft_r2c", {Widening{ScalarType::BFloat16, ScalarType::Float}}},
        // CUDA scatters float8 tensors (torch 2.15): the values move, none is computed, so the
        // round trip through float is exact.
        {"aten::scatter", float8},
    };
  }();
  return *table;
}

// Every narrow dtype of the table: a call holding none of them (nearly every call) is not widened, which
// the fallback learns without looking its operator up by name.
const std::bitset<static_cast<size_t>(ScalarType::NumOptions)>& narrow_dtypes() {
  static const auto mask = [] {
    std::bitset<static_cast<size_t>(ScalarType::NumOptions)> bits;
    for (const Widening& w : kEveryOperator) {
      bits.set(static_cast<size_t>(w.from));
    }
    for (const auto& entry : operator_widenings()) {
      for (const Widening& w : entry.second) {
        bits.set(static_cast<size_t>(w.from));
      }
    }
    return bits;
  }();
  return mask;
}

bool is_scalar_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) {
    return is_scalar_type(type->castRaw<c10::OptionalType>()->getElementType());
  }
  return type->kind() == c10::TypeKind::ScalarTypeType;
}

bool is_written(const c10::Argument& argument) {
  return argument.alias_info() != nullptr && argument.alias_info()->isWrite();
}

// Calls f(tensor) for each device tensor in `value` (a tensor or a list of them).
template <typename F>
void for_each_device_tensor(const c10::IValue& value, const F& f) {
  const auto visit = [&](const at::Tensor& t) {
    if (t.defined() && t.is_privateuseone()) {
      f(t);
    }
  };
  if (value.isTensor()) {
    visit(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) {
      visit(t);
    }
  } else if (value.isOptionalTensorList()) {
    for (const auto& t : value.toOptionalTensorVector()) {
      if (t.has_value()) {
        visit(*t);
      }
    }
  }
}

// Whether an argument of `dtype` leaves a call whose narrow dtype is `narrow` with that result type.
// float8 promotes with no other dtype: beside it, an integer tensor is an index (scatter's).
bool keeps_narrow(ScalarType dtype, ScalarType narrow) {
  if (c10::isFloat8Type(narrow)) {
    return dtype == narrow || !(c10::isFloatingType(dtype) || c10::isComplexType(dtype));
  }
  return c10::promoteTypes(dtype, narrow) == narrow;
}

// The widening that applies to this call: the first of the operator's (then every operator's)
// whose narrow dtype an argument holds, provided the narrow dtype is the call's result type (an
// argument of a wider dtype, as in complex32 * float32 -> complex64, leaves the call to the CPU
// kernel, which promotes it itself).
std::optional<Widening> choose(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> arguments) {
  c10::SmallVector<ScalarType, 8> present;
  const auto& schema = op.schema().arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    for_each_device_tensor(arguments[i], [&](const at::Tensor& t) { present.push_back(t.scalar_type()); });
    if (is_scalar_type(schema[i].real_type()) && arguments[i].isInt()) {
      present.push_back(static_cast<ScalarType>(arguments[i].toInt()));
    }
  }
  const auto& narrow = narrow_dtypes();
  if (std::none_of(present.begin(), present.end(), [&](ScalarType dtype) {
        return static_cast<size_t>(dtype) < narrow.size() && narrow.test(static_cast<size_t>(dtype));
      })) {
    return std::nullopt;
  }
  const auto holds = [&](ScalarType dtype) {
    return std::find(present.begin(), present.end(), dtype) != present.end();
  };
  std::optional<Widening> chosen;
  const auto& table = operator_widenings();
  if (const auto entry = table.find(op.schema().name()); entry != table.end()) {
    for (const Widening& w : entry->second) {
      if (holds(w.from)) {
        chosen = w;
        break;
      }
    }
  }
  if (!chosen) {
    for (const Widening& w : kEveryOperator) {
      if (holds(w.from)) {
        chosen = w;
        break;
      }
    }
  }
  if (!chosen) {
    return std::nullopt;
  }
  for (const ScalarType dtype : present) {
    if (!keeps_narrow(dtype, chosen->from)) {
      return std::nullopt;
    }
  }
  return chosen;
}

// The dtype CUDA returns where the wide computation returned `dtype`: the narrow dtype for the wide
// one, and the matching real or complex dtype (|complex32| is half, as |complex64| is float).
std::optional<ScalarType> narrowed(ScalarType dtype, const Widening& w) {
  if (dtype == w.to) {
    return w.from;
  }
  if (c10::isComplexType(w.from) && dtype == c10::toRealValueType(w.to)) {
    return c10::toRealValueType(w.from);
  }
  if (w.from == ScalarType::Half && dtype == ScalarType::ComplexFloat) {
    return ScalarType::ComplexHalf;
  }
  return std::nullopt;
}

// Set while a widened call runs: conversions and copies inside it run on the plain fallback.
// The dtype an argument computes in: the narrow dtype's wide one, and for complex32 also half
// arguments in float (torch.complex of two half tensors, a half factor), as CUDA's kernels compute them.
std::optional<ScalarType> wider(ScalarType dtype, const Widening& w) {
  if (dtype == w.from) {
    return w.to;
  }
  if (c10::isComplexType(w.from) && dtype == c10::toRealValueType(w.from)) {
    return c10::toRealValueType(w.to);
  }
  return std::nullopt;
}

thread_local bool widening = false;

// Runs `op` through the CPU fallback in a wider dtype when its arguments hold a dtype that CUDA's
// kernel accepts and the CPU's does not, and narrows the results back to what CUDA returns.
// Returns false, with the stack untouched, when no widening applies.
bool run_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  if (widening) {
    return false;
  }
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  const size_t first = stack->size() - arguments.size();
  const auto w = choose(op, c10::ArrayRef<c10::IValue>(*stack).slice(first));
  if (!w) {
    return false;
  }
  struct Flag {
    Flag() {
      widening = true;
    }
    ~Flag() {
      widening = false;
    }
  } flag;

  // Arguments: narrow tensors become wide copies (those the operator writes are copied back
  // below), a narrow dtype argument becomes the wide one. A dtype asked for explicitly is a dtype
  // the caller wants, not one to narrow.
  std::vector<at::Tensor> inputs;
  std::vector<std::pair<at::Tensor, at::Tensor>> written; // (argument, its wide copy)
  bool wide_dtype_requested = false;
  const auto widen = [&](const at::Tensor& t, bool writes) -> at::Tensor {
    inputs.push_back(t);
    const auto dtype = t.defined() && t.is_privateuseone() ? wider(t.scalar_type(), *w) : std::nullopt;
    if (!dtype) {
      return t;
    }
    at::Tensor wide = t.to(*dtype);
    if (writes) {
      written.emplace_back(t, wide);
    }
    return wide;
  };
  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& value = (*stack)[first + i];
    const bool writes = is_written(arguments[i]);
    if (value.isTensor()) {
      value = widen(value.toTensor(), writes);
    } else if (value.isTensorList()) {
      std::vector<at::Tensor> list = value.toTensorVector();
      for (auto& t : list) {
        t = widen(t, writes);
      }
      value = c10::IValue(c10::List<at::Tensor>(c10::ArrayRef<at::Tensor>(list)));
    } else if (value.isOptionalTensorList()) {
      auto list = value.toOptionalTensorVector();
      for (auto& t : list) {
        if (t.has_value()) {
          t = widen(*t, writes);
        }
      }
      value = c10::IValue(c10::List<std::optional<at::Tensor>>(c10::ArrayRef<std::optional<at::Tensor>>(list)));
    } else if (is_scalar_type(arguments[i].real_type()) && value.isInt()) {
      const auto dtype = static_cast<ScalarType>(value.toInt());
      wide_dtype_requested |= narrowed(dtype, *w).has_value();
      if (dtype == w->from) {
        value = c10::IValue(static_cast<int64_t>(w->to));
      }
    }
  }

  at::native::cpu_fallback(op, stack, /*error_on_views=*/false, cpu_key);

  for (auto& [argument, wide] : written) {
    if (argument.sizes() != wide.sizes()) {
      argument.resize_(wide.sizes()); // an out= argument the operator resized
    }
    argument.copy_(wide);
  }
  // Results: a wide copy of an argument is that argument again; a new result of a wide dtype
  // becomes CUDA's dtype; an argument returned as it was (out= of a wide dtype) stays.
  const auto narrow = [&](const at::Tensor& t) -> at::Tensor {
    for (const auto& [argument, wide] : written) {
      if (t.is_same(wide)) {
        return argument;
      }
    }
    for (const at::Tensor& input : inputs) {
      if (t.is_same(input)) {
        return t;
      }
    }
    if (!t.defined() || !t.is_privateuseone() || wide_dtype_requested) {
      return t;
    }
    const auto dtype = narrowed(t.scalar_type(), *w);
    return dtype ? t.to(*dtype) : t;
  };
  const size_t returns = schema.returns().size();
  for (size_t i = stack->size() - returns; i < stack->size(); ++i) {
    c10::IValue& value = (*stack)[i];
    if (value.isTensor()) {
      value = narrow(value.toTensor());
    } else if (value.isTensorList()) {
      std::vector<at::Tensor> list = value.toTensorVector();
      for (auto& t : list) {
        t = narrow(t);
      }
      value = c10::IValue(c10::List<at::Tensor>(c10::ArrayRef<at::Tensor>(list)));
    }
  }
  return true;
}

const FallbackExtension wider_dtypes("kernel_families (wider dtypes)", &run_widened, nullptr);

} // namespace
} // namespace torch_foo

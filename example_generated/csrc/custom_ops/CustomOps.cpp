// Custom operators: operators of the backend's own namespace, torch.ops.torch_foo.*.
//
// A backend adds operators PyTorch does not have (a fused kernel its hardware runs well) in its
// own namespace. The example is bias_gelu(x, bias) = gelu(x + bias), with bias broadcast along the
// last dimension, a fusion transformer MLPs use, and its backward. This file declares the schemas
// and registers a foo kernel and a CPU kernel for each: the device kernels are the operator
// library's (fooOpBiasGelu, csrc/kernels/emulated/custom_ops.cpp), the CPU kernels compose ATen's
// own operators. torch_foo/ops.py loads this library and adds the Python parts: the fake kernels
// (shapes for torch.compile and FakeTensor) and the autograd formula. tests/test_custom_ops.py
// checks all of it with torch.library.opcheck.
//
// This file is built on PyTorch's stable ABI alone (torch/csrc/stable, torch/headeronly: C
// functions of libtorch and header-only C++ over them), compiled for the oldest supported torch
// release (TORCH_TARGET_VERSION, csrc/custom_ops/CMakeLists.txt), into a library of its own,
// torch_foo/_custom_ops.so: the same binary loads on every supported release. Torch's other headers
// refuse to compile here (they #error when TORCH_TARGET_VERSION is defined), and the link admits
// only torch's C shim (libtorch_cpu) and the extension's table (csrc/kernels/custom_ops.h), through which the device
// kernels run in the extension's runtime: tests/test_custom_ops.py checks the library's imports.
// What the stable ABI does not cover (the device's guard, allocator, hooks, ...) stays in the
// extension, built per release: the template's docs/updating.md, "Custom operators on the stable ABI".
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <array>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

#include "../kernels/custom_ops.h"

namespace torch_foo {
namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// Raises: a std::exception from a kernel reaches Python as a RuntimeError with its message.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw std::runtime_error(message.str());
}

template <typename... Parts>
void check(bool condition, const Parts&... parts) {
  if (!condition) {
    fail(parts...);
  }
}

std::string shape(const Tensor& t) {
  std::string text = "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    text += (d > 0 ? ", " : "") + std::to_string(t.size(d));
  }
  return text + "]";
}

std::string device(const Tensor& t) {
  const torch::stable::Device d = t.device();
  switch (d.type()) {
    case torch::headeronly::DeviceType::CPU: return "cpu";
    case torch::headeronly::DeviceType::PrivateUse1: return "foo:" + std::to_string(d.index());
    default: return "device type " + std::to_string(static_cast<int>(d.type()));
  }
}

bool same_device(const Tensor& a, const Tensor& b) {
  const torch::stable::Device da = a.device();
  const torch::stable::Device db = b.device();
  return da.type() == db.type() && da.index() == db.index();
}

bool is_floating(ScalarType t) {
  return t == ScalarType::Half || t == ScalarType::BFloat16 || t == ScalarType::Float || t == ScalarType::Double;
}

void check_inputs(const char* op, const Tensor& x, const Tensor& bias) {
  check(x.dim() >= 1, op, ": x must have at least one dimension");
  check(
      bias.dim() == 1 && bias.size(0) == x.size(-1),
      op,
      ": bias must be a vector of size x.size(-1) = ",
      x.size(-1),
      ", got shape ",
      shape(bias));
  check(is_floating(x.scalar_type()), op, ": x must have a floating point dtype, got ", x.scalar_type());
  check(
      x.scalar_type() == bias.scalar_type(),
      op,
      ": x and bias must have one dtype, got ",
      x.scalar_type(),
      " and ",
      bias.scalar_type());
  check(same_device(x, bias), op, ": x and bias must be on one device, got ", device(x), " and ", device(bias));
}

void check_grad(const Tensor& grad, const Tensor& x, const Tensor& bias) {
  check_inputs("bias_gelu_backward", x, bias);
  bool same_shape = grad.dim() == x.dim();
  for (int64_t d = 0; same_shape && d < x.dim(); ++d) {
    same_shape = grad.size(d) == x.size(d);
  }
  check(same_shape, "bias_gelu_backward: grad must have the shape of x, got ", shape(grad));
  check(grad.scalar_type() == x.scalar_type() && same_device(grad, x), "bias_gelu_backward: grad must match x");
}

// ---- device kernels ------------------------------------------------------------------------------

// The extension's table of the operator library (fooCustomOpsEntry), checked once.
const fooCustomOpsEntry& entry() {
  static const fooCustomOpsEntry* const table = [] {
    const fooCustomOpsEntry* t = fooCustomOpsGetEntry();
    check(
        t != nullptr && t->version >= FOO_CUSTOM_OPS_ENTRY_VERSION && t->size >= sizeof(fooCustomOpsEntry),
        "torch_foo._custom_ops: the extension torch_foo._C is older than this library; rebuild both with "
        "pip install --no-build-isolation -e .");
    return t;
  }();
  return *table;
}

fooDataType op_dtype(ScalarType t) {
  switch (t) {
#define FOO_OP_DTYPE(DTYPE, TYPE, SCALAR_TYPE) \
  case ScalarType::SCALAR_TYPE: return DTYPE;
    FOO_OP_DTYPES(FOO_OP_DTYPE)
#undef FOO_OP_DTYPE
    default: fail("foo has no kernel for dtype ", t, " here");
  }
}

// The operator library's description of out = f(inputs...) (kernels.h, fooIter): out is
// contiguous and shaped like x; an input of fewer dimensions than x lines up with x's last ones and
// is broadcast along the others (bias). Dimension 0 varies fastest; dimensions of size 1 are
// dropped and neighbours that every operand walks as one are merged, as TensorIterator does.
template <int NOPERANDS>
class Geometry {
 public:
  Geometry(const Tensor& out, const std::array<const Tensor*, NOPERANDS - 1>& inputs) {
    std::array<const Tensor*, NOPERANDS> operands{};
    operands[0] = &out;
    for (int a = 1; a < NOPERANDS; ++a) {
      operands[a] = inputs[a - 1];
    }
    const int64_t ndim = out.dim();
    std::memset(&it_, 0, sizeof(it_));
    int n = 0;
    for (int64_t d = ndim - 1; d >= 0; --d) { // fastest first
      const int64_t size = out.size(d);
      if (size == 1) {
        continue;
      }
      std::array<int64_t, NOPERANDS> strides{};
      for (int a = 0; a < NOPERANDS; ++a) {
        const int64_t lead = ndim - operands[a]->dim(); // dimensions the operand is broadcast along
        strides[a] = d < lead ? 0 : operands[a]->stride(d - lead) * static_cast<int64_t>(operands[a]->element_size());
      }
      bool merges = n > 0;
      for (int a = 0; merges && a < NOPERANDS; ++a) {
        merges = strides[a] == strides_[a][n - 1] * sizes_[n - 1];
      }
      if (merges) {
        sizes_[n - 1] *= size;
        continue;
      }
      check(
          n < FOO_OP_MAX_DIMS,
          "bias_gelu: the foo operator library takes at most ",
          FOO_OP_MAX_DIMS,
          " dimensions that cannot be merged");
      sizes_[n] = size;
      for (int a = 0; a < NOPERANDS; ++a) {
        strides_[a][n] = strides[a];
      }
      ++n;
    }
    it_.ndim = n;
    it_.sizes = sizes_.data();
    it_.noperands = NOPERANDS;
    for (int a = 0; a < NOPERANDS; ++a) {
      it_.data[a] = operands[a]->data_ptr();
      it_.strides[a] = strides_[a].data();
      it_.dtype[a] = op_dtype(operands[a]->scalar_type());
    }
  }

  const fooIter* get() const {
    return &it_;
  }

 private:
  fooIter it_;
  std::array<int64_t, FOO_OP_MAX_DIMS> sizes_{};
  std::array<std::array<int64_t, FOO_OP_MAX_DIMS>, NOPERANDS> strides_{};
};

using Kernel = fooError_t (*)(const fooIter*, fooStream_t);

// Runs `kernel` on x's device, on its current stream, into a new contiguous tensor shaped like x.
template <int NOPERANDS>
Tensor on_device(const Tensor& x, const std::array<const Tensor*, NOPERANDS - 1>& inputs, Kernel kernel) {
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  Tensor out = torch::stable::new_empty(x, x.sizes()); // from the device's allocator, contiguous
  if (out.numel() == 0) {
    return out;
  }
  const Geometry<NOPERANDS> geometry(out, inputs);
  // The stream's handle is the runtime's: the device guard of the extension gives it
  // (getStreamNativeHandle), as the stable ABI asks it (Stream::nativeHandle, torch 2.13).
  const auto stream =
      static_cast<fooStream_t>(torch::stable::accelerator::getCurrentStream(x.get_device_index()).nativeHandle());
  const fooError_t error = kernel(geometry.get(), stream);
  if (error != fooSuccess) {
    const char* detail = entry().op_get_last_error_message();
    const std::string more = detail != nullptr && detail[0] != '\0' ? std::string(": ") + detail : "";
    fail("foo operator library: ", entry().get_error_string(error), more);
  }
  return out;
}

Tensor bias_gelu(const Tensor& x, const Tensor& bias) {
  check_inputs("bias_gelu", x, bias);
  return on_device<3>(x, {&x, &bias}, entry().op_bias_gelu);
}

Tensor bias_gelu_backward(const Tensor& grad, const Tensor& x, const Tensor& bias) {
  check_grad(grad, x, bias);
  return on_device<4>(x, {&grad, &x, &bias}, entry().op_bias_gelu_backward);
}

// ---- CPU kernels: the same mathematics from ATen's CPU operators -------------------------------
//
// The stable ABI calls any ATen operator through the dispatcher (torch_call_dispatcher), with the
// arguments as StableIValues: tensors, numbers, strings, lists, but not a Scalar (add.Tensor's
// alpha; measured with 2.13.0 and 2.14.1). x + bias is stable's subtract with alpha = -1, exact in floating point.

// x + bias, the bias broadcast along x's last dimension (check_inputs checked its shape).
Tensor add_bias(const Tensor& x, const Tensor& bias) {
  return torch::stable::subtract(x, bias, -1.0);
}

Tensor bias_gelu_cpu(const Tensor& x, const Tensor& bias) {
  check_inputs("bias_gelu", x, bias);
  std::array<StableIValue, 2> stack{
      torch::stable::detail::from(add_bias(x, bias)), torch::stable::detail::from(std::string("none"))};
  STABLE_TORCH_ERROR_CODE_CHECK(torch_call_dispatcher("aten::gelu", "", stack.data(), TORCH_ABI_VERSION));
  return torch::stable::contiguous(torch::stable::detail::to<Tensor>(stack[0]));
}

Tensor bias_gelu_backward_cpu(const Tensor& grad, const Tensor& x, const Tensor& bias) {
  check_grad(grad, x, bias);
  std::array<StableIValue, 3> stack{
      torch::stable::detail::from(grad),
      torch::stable::detail::from(add_bias(x, bias)),
      torch::stable::detail::from(std::string("none"))};
  STABLE_TORCH_ERROR_CODE_CHECK(torch_call_dispatcher("aten::gelu_backward", "", stack.data(), TORCH_ABI_VERSION));
  return torch::stable::contiguous(torch::stable::detail::to<Tensor>(stack[0]));
}

} // namespace

STABLE_TORCH_LIBRARY(torch_foo, m) {
  m.def("bias_gelu(Tensor x, Tensor bias) -> Tensor");
  m.def("bias_gelu_backward(Tensor grad, Tensor x, Tensor bias) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(torch_foo, PrivateUse1, m) {
  m.impl("bias_gelu", TORCH_BOX(&bias_gelu));
  m.impl("bias_gelu_backward", TORCH_BOX(&bias_gelu_backward));
}

STABLE_TORCH_LIBRARY_IMPL(torch_foo, CPU, m) {
  m.impl("bias_gelu", TORCH_BOX(&bias_gelu_cpu));
  m.impl("bias_gelu_backward", TORCH_BOX(&bias_gelu_backward_cpu));
}

} // namespace torch_foo

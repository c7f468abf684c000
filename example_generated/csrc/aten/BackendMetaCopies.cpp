// New tensors made like a tagged tensor keep its format tag (core/BackendMeta.h).
//
// PyTorch copies c10::BackendMeta only with shallow copies; an operator that makes a new tensor
// starts without it. For the operators whose result is "a new tensor like this one" the device
// keeps the source's format, as an accelerator with real formats does (its optimizer states then
// share their parameter's layout): clone (and contiguous()), empty_like and all that is built on it
// (zeros_like, ones_like, rand_like, the optimizers' state), new_empty (which copy.deepcopy uses)
// and _to_copy between devices or dtypes (tensor.to("foo:1"), tensor.half(),
// Module.to()). copy_ into an existing tensor keeps the destination's format; results of other
// operators start plain; the host has no formats, so a copy to the CPU drops it. Each kernel runs
// PyTorch's generic implementation and then copies the tag.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/new_empty_native.h>
#include <torch/library.h>

#include "../core/BackendMeta.h"

namespace torch_foo {
namespace {

at::Tensor clone(const at::Tensor& self, std::optional<c10::MemoryFormat> memory_format) {
  at::Tensor result = at::native::clone(self, memory_format);
  copy_tensor_format(self, result);
  return result;
}

at::Tensor empty_like(
    const at::Tensor& self,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  at::Tensor result = at::native::empty_like(self, dtype, layout, device, pin_memory, memory_format);
  copy_tensor_format(self, result);
  return result;
}

at::Tensor new_empty(
    const at::Tensor& self,
    c10::SymIntArrayRef size,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  at::Tensor result = at::native::new_empty_symint(self, size, dtype, layout, device, pin_memory);
  copy_tensor_format(self, result);
  return result;
}

at::Tensor to_copy(
    const at::Tensor& self,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    bool non_blocking,
    std::optional<c10::MemoryFormat> memory_format) {
  at::Tensor result = at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
  copy_tensor_format(self, result);
  return result;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("clone", clone);
  m.impl("empty_like", empty_like);
  m.impl("new_empty", new_empty);
  m.impl("_to_copy", to_copy);
}

} // namespace torch_foo

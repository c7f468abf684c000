// Tensor creation: empty.memory_format and empty_strided.
//
// Every factory (torch.ones, torch.zeros, torch.full, tensor.to("foo"), outputs of kernels)
// starts from one of these two operators; the values are then written by fill_ or copy_. They
// make the requested device current, take memory from the device allocator and wrap it in a
// TensorImpl whose dispatch key is PrivateUse1.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../core/Device.h"
#include "../core/DeviceAllocator.h"

namespace torch_foo {
namespace {

c10::Device checked_device(
    std::optional<c10::Device> device, std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  const c10::Device d = c10::device_or_default(device);
  TORCH_CHECK(d.is_privateuseone(), "Expected a foo device, got ", d);
  TORCH_CHECK(
      c10::layout_or_default(layout) == c10::Layout::Strided,
      "foo tensors support only the strided layout, not ",
      c10::layout_or_default(layout));
  TORCH_CHECK(
      !c10::pinned_memory_or_default(pin_memory),
      "Only CPU tensors can be pinned; create the tensor on the CPU with pin_memory=True and copy it");
  if (d.has_index()) {
    check_device_index(d.index());
  }
  return d;
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(checked_device(device, layout, pin_memory));
  return at::detail::empty_generic(size, device_allocator(), kDeviceKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(
    c10::IntArrayRef size,
    c10::IntArrayRef stride,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  const c10::DeviceGuard guard(checked_device(device, layout, pin_memory));
  return at::detail::empty_strided_generic(size, stride, device_allocator(), kDeviceKeys, c10::dtype_or_default(dtype));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
}

} // namespace torch_foo

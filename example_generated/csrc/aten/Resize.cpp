// Resizing and re-pointing tensors: resize_ and the set_ overloads.
//
// resize_ grows a tensor's storage when its new shape needs more bytes (out= arguments of every
// operator end up here). set_ makes a tensor use another storage, offset, sizes and strides;
// torch.load and Storage-based construction use it. Growing a storage allocates a new device
// block and copies the old bytes on the device (DeviceAllocator.cpp), never through the host.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#ifndef AT_PER_OPERATOR_HEADERS
#define AT_PER_OPERATOR_HEADERS // compat/OperatorHelpers.h: per-operator headers, not ATen/NativeFunctions.h (slower)
#endif
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/set_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../compat/OperatorHelpers.h"
#include "../core/DeviceAllocator.h"

namespace torch_foo {
namespace {

void maybe_resize_storage(c10::TensorImpl* self, size_t new_size_bytes) {
  if (self->numel() == 0) {
    return; // an empty tensor needs no memory, whatever its storage holds
  }
  const c10::Storage& storage = self->unsafe_storage();
  TORCH_CHECK(storage, "Tensor: invalid null storage");
  if (new_size_bytes > storage.nbytes()) {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), new_size_bytes);
  }
}

void resize_impl(c10::TensorImpl* self, c10::IntArrayRef size, at::OptionalIntArrayRef stride) {
  if (self->sizes() == size && (!stride || self->strides() == stride.value())) {
    return;
  }
  const auto itemsize = self->dtype().itemsize();
  const auto storage_offset = self->storage_offset();
  size_t storage_size = 1;
  if (stride) {
    self->set_sizes_and_strides(size, *stride);
    storage_size = at::detail::computeStorageNbytes(size, *stride, itemsize, storage_offset);
  } else {
    self->set_sizes_contiguous(size);
    storage_size = at::detail::computeStorageNbytesContiguous(size, itemsize, storage_offset);
  }
  maybe_resize_storage(self, storage_size);
}

const at::Tensor& resize_(
    const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  resize_impl(impl, size, std::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_offset_(
    at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  const at::OptionalIntArrayRef stride_opt = stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt;
  resize_impl(self.unsafeGetTensorImpl(), size, stride_opt);
  return self;
}

// set_() with no source: an empty storage on the tensor's device.
at::Tensor& set_empty_(at::Tensor& self) {
  const c10::DeviceGuard guard(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, device_allocator(), /*resizable=*/true);
  return set_storage_offset_(self, std::move(storage), 0, {0}, {});
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage_offset_);
  m.impl("set_.source_Storage", at::native::set_);
  m.impl("set_.source_Tensor", at::native::set_tensor_);
  m.impl("set_", set_empty_);
}

} // namespace torch_foo

// tensor.record_stream(stream): the one operator about streams.
//
// A tensor allocated on one stream and used by work on another must not be reused by the
// allocator before that work has run. record_stream tells the caching allocator so
// (DeviceAllocator.cpp): when the tensor is freed, the block waits for the other streams.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "../core/DeviceAllocator.h"

namespace torch_foo {
namespace {

void record_stream(at::Tensor& self, at::Stream stream) {
  TORCH_CHECK(
      stream.device_type() == c10::DeviceType::PrivateUse1,
      "record_stream: expected a foo stream, got a stream of ",
      stream.device());
  device_allocator()->recordStream(self.storage().data_ptr(), stream);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", record_stream);
}

} // namespace torch_foo

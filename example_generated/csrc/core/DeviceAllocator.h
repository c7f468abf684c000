// Device memory: the caching allocator PyTorch uses for every foo tensor and storage.
//
// PyTorch calls allocate() through c10::GetAllocator(kPrivateUse1) when it creates a tensor (our
// empty kernels) or a storage, recordStream() for tensor.record_stream, and reads statistics and
// empties the cache through c10::getDeviceAllocator() for torch.accelerator.memory_* and
// torch.foo.memory_*. Like CUDA's, the allocator keeps freed blocks for reuse, because asking
// the driver for memory is slow and (for freeing) synchronises the device.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>

namespace torch_foo {

c10::DeviceAllocator* device_allocator();

// Grows or shrinks a device storage to `size_bytes`, keeping its contents (resize_, set_,
// UntypedStorage.resize_ through the hooks).
void resize_storage_bytes(c10::StorageImpl* storage, size_t size_bytes);

} // namespace torch_foo

// Device memory: the allocator PyTorch uses for every foo tensor and storage.
//
// PyTorch calls allocate() through c10::GetAllocator(kPrivateUse1) when it creates a tensor (our
// empty kernels) or a storage, and reads statistics through c10::getDeviceAllocator() for
// torch.accelerator.memory_* and torch.foo.memory_*. This allocator asks the runtime for
// every block and returns it on free; a real device, where allocation is slow and synchronising,
// puts a caching allocator here.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>

namespace torch_foo {

c10::DeviceAllocator* device_allocator();

// Grows or shrinks a device storage to `size_bytes`, keeping its contents (resize_, set_,
// UntypedStorage.resize_ through the hooks).
void resize_storage_bytes(c10::StorageImpl* storage, size_t size_bytes);

} // namespace torch_foo

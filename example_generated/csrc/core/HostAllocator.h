// Pinned host memory: the allocator behind tensor.pin_memory() and DataLoader(pin_memory=True).
//
// PyTorch asks the hooks for it (getPinnedMemoryAllocator) when this backend is the accelerator,
// and torch.accelerator.empty_host_cache and the host memory statistics reach it through
// at::getHostAllocator(kPrivateUse1). It is PyTorch's own caching host allocator
// (ATen/core/CachingHostAllocator.h, shared by CUDA and XPU) over fooMallocHost, with this
// runtime's streams and events: a pinned block used by an asynchronous copy is not reused before
// that copy has run.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace torch_foo {

c10::Allocator* host_allocator();

// True if `ptr` points into pinned host memory.
bool is_pinned(const void* ptr);

// Keeps the pinned block of `data` (a host tensor's storage) from being reused until the work
// enqueued so far on `stream` has run.
void record_host_use(const c10::DataPtr& data, c10::Stream stream);

} // namespace torch_foo

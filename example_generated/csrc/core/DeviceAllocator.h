// Device memory: the caching allocator PyTorch uses for every foo tensor and storage.
//
// PyTorch calls allocate() through c10::GetAllocator(kPrivateUse1) when it creates a tensor (our
// empty kernels) or a storage, recordStream() for tensor.record_stream, and reads statistics and
// empties the cache through c10::getDeviceAllocator() for torch.accelerator.memory_* and
// torch.foo.memory_*. Like CUDA's, the allocator keeps freed blocks for reuse, because asking
// the driver for memory is slow and (for freeing) synchronises the device.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace torch_foo {

c10::DeviceAllocator* device_allocator();

// The dispatch keys of a dense tensor whose memory device_allocator() holds (the empty kernels).
constexpr c10::DispatchKeySet kDeviceKeys(c10::DispatchKey::PrivateUse1);

// The segments of device memory the allocator holds, with their blocks in address order, by
// device and address: what memory snapshots show (torch.foo.memory._snapshot()).
struct BlockInfo {
  size_t size = 0;
  size_t requested = 0; // bytes asked for (allocated blocks)
  bool allocated = false; // held by a tensor
  bool active = false; // allocated, or freed but still in use by another stream
  std::shared_ptr<c10::GatheredContext> context; // where it was allocated, if an observer gave it
};

struct SegmentInfo {
  c10::DeviceIndex device = 0;
  c10::MempoolId_t pool{0, 0}; // the private pool it belongs to; {0, 0}: the general cache
  uintptr_t address = 0;
  size_t total_size = 0;
  size_t allocated_size = 0;
  size_t active_size = 0;
  size_t requested_size = 0;
  c10::StreamId stream = 0;
  bool small = false; // from the small pool
  std::vector<BlockInfo> blocks;
};

std::vector<SegmentInfo> memory_segments();

// What the allocator does, as an observer sees it (the names of CUDA's memory snapshots: "alloc",
// "free_requested", "free_completed", "segment_alloc", "segment_free", "oom").
enum class AllocatorAction { Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, Oom };

struct AllocatorEvent {
  AllocatorAction action = AllocatorAction::Alloc;
  c10::DeviceIndex device = 0;
  uintptr_t address = 0; // for Oom: the device's free bytes
  size_t size = 0; // bytes asked for (Alloc, FreeRequested, FreeCompleted, Oom), or of the segment
  c10::StreamId stream = 0;
  std::shared_ptr<c10::GatheredContext> context; // what context_for gave (Alloc, FreeRequested), or null
};

// An observer of every allocation and free (the memory history of the profiler feature is one). Its
// functions are called from any thread; they must not allocate device memory.
struct AllocatorObserver {
  // The stack trace to keep for an allocation or free about to happen (null: none). Called before
  // the allocator takes its lock: gathering Python frames takes the GIL. An allocation's stack trace
  // stays with its block (memory_segments()) until it is freed.
  std::shared_ptr<c10::GatheredContext> (*context_for)(AllocatorAction action);
  // One action: with the allocator's lock held, but for Oom (raised after releasing it).
  void (*record)(const AllocatorEvent& event);
};

// Installs `observer` (an object that outlives its use; null: none) for every device. While none is
// installed, the allocator pays one atomic load per allocation and free for observers.
void set_allocator_observer(const AllocatorObserver* observer);

// torch.foo.set_per_process_memory_fraction: from now on the allocator takes at most
// `fraction` (0 to 1) of `device`'s capacity; a request past it frees the cache, then raises
// torch.OutOfMemoryError. 1 (the default) leaves only the device's own limit.
void set_memory_fraction(double fraction, c10::DeviceIndex device);
double memory_fraction(c10::DeviceIndex device);

// torch.foo.caching_allocator_alloc / caching_allocator_delete: `nbytes` of `stream`'s device,
// from the cache, for use on `stream`; raw_delete raises for a pointer raw_alloc did not return.
void* raw_alloc(size_t nbytes, c10::Stream stream);
void raw_delete(void* ptr);

// Private memory pools (BlockCache.h says how they work; graph capture, the graphs feature, uses
// them). A new pool id, numbered as CUDA's are: {0, n} for a pool to share (a pool
// handle), {n, 0} for a graph's own.
c10::MempoolId_t new_pool_id(bool for_graph);
// Opens route `route` (an id of the caller's, unique among open routes: graph capture gives the runtime's
// capture id): until end_allocate_to_pool(route), allocations on the streams of `device` that
// `filter` accepts come from `pool` (created on first use; each begin counts one more user of it).
// `filter` is called with the allocator's lock held, on each such allocation.
void begin_allocate_to_pool(
    c10::DeviceIndex device, uint64_t route, c10::MempoolId_t pool, std::function<bool(c10::Stream)> filter);
void end_allocate_to_pool(uint64_t route);
// One user of `pool` less; with none left, its memory goes back to the runtime (empty_cache()).
void release_pool(c10::MempoolId_t pool);

// Grows or shrinks a device storage to `size_bytes`, keeping its contents (resize_, set_,
// UntypedStorage.resize_ through the hooks).
void resize_storage_bytes(c10::StorageImpl* storage, size_t size_bytes);

} // namespace torch_foo

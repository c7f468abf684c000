// The caching allocator's cache of device memory blocks, shared by the files of the allocator (not
// by the rest of the extension: DeviceAllocator.h is the allocator's interface):
//
//   BlockCache.cpp       the blocks: best fit per stream, splitting and merging, uses on other
//                        streams, giving whole segments back to the runtime
//   MemoryLimit.cpp      segments from the runtime, the per-process memory fraction, and the
//                        out-of-memory error
//   AllocatorStats.cpp   statistics, and the reports to the profiler
//   DeviceAllocator.cpp  what PyTorch calls (c10::DeviceAllocator), raw blocks, storage resizing
//
// How the cache works (the same scheme as PyTorch's CUDA caching allocator, without its tuning
// knobs):
//
//  - Memory comes from the runtime in segments: requests up to 1 MiB (the small pool) are carved
//    out of 2 MiB segments; larger ones get a segment of their size rounded up to 1 MiB. A block
//    is a segment or a piece of one; a free block is split when it is much larger than a request,
//    and merged with its free neighbours when freed.
//  - Blocks belong to the stream that was current when they were allocated. A freed block is
//    reusable at once by later work on that stream, because a stream runs its work in order; other
//    streams never get it. If tensor.record_stream(s) marked it as used on other streams, freeing
//    records an event on each of them and the block waits until they have all completed.
//  - Graph-private pools (graph capture, Graph.cpp): while a stream captures into pool P, its
//    allocations come from P's own segments, and blocks of P go back to P when freed, during the
//    capture or after it: a graph's replays keep using the addresses it captured, so no other work
//    may get them. Blocks of P are found by pool, not by stream (every stream of a capture shares
//    them). Graphs may share P (a use count); when the last one lets it go (reset), P's whole free
//    segments go back to the runtime at the next empty_cache(), and its other segments as soon as
//    their blocks are freed and the cache is emptied again.
//  - empty_cache() hands every whole free segment back to the runtime. When the runtime is out of
//    memory, the allocator first does the same (after waiting for blocks held back by events) and
//    retries, then tries a segment of exactly the request, and only then raises
//    torch.OutOfMemoryError. The process goes on working after it.
//
// Observability, as CUDA's: every allocation and free is reported to the PyTorch profiler
// (c10::reportMemoryUsageToProfiler: profile_memory=True), and while memory history is recorded
// (MemoryHistory.h) each block keeps the stack trace of its allocation and each action is appended
// to the history; memory_segments() lists the segments and blocks for snapshots.
//
// Statistics follow torch.cuda.memory_stats: "allocated" counts blocks held by tensors, "active"
// also counts freed blocks that still wait for other streams, "reserved" and "segment" count
// memory taken from the runtime, "inactive_split" counts free pieces of split segments.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>

#include "Device.h"
#include "DeviceAllocator.h"
#include "MemoryHistory.h"

namespace torch_foo::allocator {

using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512; // requests are rounded up to a multiple of this
constexpr size_t kSmallSize = size_t{1} << 20; // requests up to this size come from the small pool
constexpr size_t kSmallSegment = size_t{2} << 20; // the segment size of the small pool
constexpr size_t kLargeRound = size_t{1} << 20; // large segments are multiples of this

// A range of device memory: a whole segment from the runtime, or a piece of one.
struct Block {
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0; // the stream it was allocated on
  uint32_t pool = 0; // the graph-private pool it belongs to (its key, see PrivatePool); 0: the general cache
  bool small = false; // which pool
  size_t size = 0;
  void* ptr = nullptr;
  size_t requested = 0; // bytes asked for, while allocated
  bool allocated = false;
  int pending_uses = 0; // recorded uses on other streams that have not completed yet
  std::vector<c10::Stream> uses; // other streams that used it (tensor.record_stream)
  Block* prev = nullptr; // neighbours in the same segment
  Block* next = nullptr;
  std::shared_ptr<c10::GatheredContext> context; // where it was allocated (while memory history records it)

  bool is_split() const {
    return prev != nullptr || next != nullptr;
  }
  bool is_free() const {
    return !allocated && pending_uses == 0;
  }
};

// Free blocks are looked up by pool, then stream (not for a private pool: its streams share its
// blocks), then size (best fit), then address.
inline c10::StreamId order_stream(const Block* block) {
  return block->pool != 0 ? 0 : block->stream;
}

struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->pool != b->pool) {
      return a->pool < b->pool;
    }
    if (order_stream(a) != order_stream(b)) {
      return order_stream(a) < order_stream(b);
    }
    if (a->size != b->size) {
      return a->size < b->size;
    }
    return std::less<const void*>()(a->ptr, b->ptr);
  }
};

using FreeBlocks = std::set<Block*, BlockOrder>;

struct DeviceCache {
  FreeBlocks small;
  FreeBlocks large;
  DeviceStats stats;

  // Blocks above max_split_size are never split (CUDA's PYTORCH_CUDA_ALLOC_CONF option). This
  // allocator has no such limit: -1, what CUDA reports when it is unset, and no oversize blocks.
  DeviceCache() {
    stats.max_split_size = -1;
  }

  FreeBlocks& pool(bool small_pool) {
    return small_pool ? small : large;
  }
};

// A use of a freed block on another stream: the block waits until `event` has completed.
struct PendingUse {
  fooEvent_t event;
  Block* block;
};

// Adds `delta` to a statistic, for all pools and for the block's pool.
// Every allocation and free updates several of them: kept small enough to inline.
inline void add(StatArray& stat, bool small, int64_t delta) {
  auto& aggregate = stat[static_cast<size_t>(StatType::AGGREGATE)];
  auto& pool = stat[static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL)];
  if (delta >= 0) {
    aggregate.increase(static_cast<size_t>(delta));
    pool.increase(static_cast<size_t>(delta));
  } else {
    aggregate.decrease(static_cast<size_t>(-delta));
    pool.decrease(static_cast<size_t>(-delta));
  }
}

// A graph-private pool (BlockCache.cpp): its blocks carry `key`.
struct PrivatePool {
  uint32_t key = 0;
  c10::DeviceIndex device = 0;
  int use_count = 0; // graphs that use it; 0: its segments go back to the runtime
  size_t segments = 0; // segments it holds
};

// The free and total bytes of `device`, as the runtime counts them (MemoryLimit.cpp).
std::pair<size_t, size_t> memory_info(c10::DeviceIndex device);

// The cache of every device, behind one mutex. Never destroyed (instance()): tensors may be freed by
// other libraries' static destructors at exit.
class BlockCache {
 public:
  static BlockCache& instance();

  // ---- BlockCache.cpp ----

  // A block of at least `nbytes` for use on `stream` of `device`, from the cache or a new segment.
  Block* malloc_block(
      c10::DeviceIndex device, c10::StreamId stream, size_t nbytes, std::shared_ptr<c10::GatheredContext> context);
  // Frees the block at `ptr` (allocated by malloc_block); nothing for other pointers.
  void free(void* ptr);
  // Marks the allocated block at `ptr` as used on `stream` (tensor.record_stream), whose native
  // stream exists (native_stream()).
  void record_stream(void* ptr, c10::Stream stream);
  // Gives every whole free segment back to the runtime (empty_cache()).
  void empty_cache();
  // Every segment and its blocks, by device and address (memory snapshots).
  std::vector<SegmentInfo> segments();

  // Graph-private pools (DeviceAllocator.h says what they are for).
  void begin_allocate_to_pool(c10::DeviceIndex device, unsigned long long capture, c10::MempoolId_t pool);
  void end_allocate_to_pool(unsigned long long capture);
  void release_pool(c10::MempoolId_t pool);

  // ---- MemoryLimit.cpp ----

  // torch.foo.set_per_process_memory_fraction and its reading (DeviceAllocator.h).

  void set_fraction(double fraction, c10::DeviceIndex device);
  double fraction(c10::DeviceIndex device);
  // `reason`: what the runtime said about the last failed allocation ("" if none was tried).
  [[noreturn]] static void raise_out_of_memory(
      c10::DeviceIndex device,
      size_t nbytes,
      size_t allocated,
      size_t reserved,
      const std::string& reason,
      size_t limit = 0);

  // ---- AllocatorStats.cpp ----

  DeviceStats stats(c10::DeviceIndex device);
  void reset_accumulated_stats(c10::DeviceIndex device);
  void reset_peak_stats(c10::DeviceIndex device);

 private:
  BlockCache() = default;

  // BlockCache.cpp
  Block* take_free_block(DeviceCache& cache, uint32_t pool, c10::StreamId stream, size_t size, bool small);
  Block* new_segment(
      std::unique_lock<std::mutex>& lock,
      c10::DeviceIndex device,
      uint32_t pool,
      c10::StreamId stream,
      size_t size,
      bool small,
      size_t nbytes);
  uint32_t pool_for(c10::DeviceIndex device, c10::StreamId stream);
  PrivatePool* private_pool(uint32_t key);
  Block* spare_block();
  void split(DeviceCache& cache, Block* block, size_t size);
  void record_uses(Block* block) noexcept;
  void make_free(Block* block);
  void process_pending_uses();
  void finish_use(const PendingUse& use);
  void release_cached_blocks(std::unique_lock<std::mutex>& lock);

  // MemoryLimit.cpp
  bool over_fraction(c10::DeviceIndex device, size_t size);
  void* device_malloc(c10::DeviceIndex device, size_t size);

  // An action on `block` for the memory history (a no-op unless it records). Caller holds mutex_.
  static void note(
      memory_history::Action action,
      const Block* block,
      size_t size,
      std::shared_ptr<c10::GatheredContext> context = nullptr) {
    if (memory_history::is_recording()) {
      memory_history::record(
          {action, block->device, reinterpret_cast<uintptr_t>(block->ptr), size, block->stream, 0, std::move(context)});
    }
  }

  // AllocatorStats.cpp
  void report_usage(const Block* block, int64_t delta);

  std::mutex mutex_; // guards everything below
  std::array<DeviceCache, kMaxDevices> caches_;
  std::unordered_map<void*, Block*> allocated_;
  std::deque<PendingUse> pending_;
  std::vector<Block*> spare_blocks_; // Blocks of merged pieces, for the next split (spare_block())
  std::array<double, kMaxDevices> fractions_ = [] {
    std::array<double, kMaxDevices> ones{};
    ones.fill(1.0);
    return ones;
  }();
  std::array<size_t, kMaxDevices> limits_{}; // bytes the cache may reserve per device (0: no limit of ours)
  std::map<c10::MempoolId_t, PrivatePool> pools_; // graph-private pools
  std::map<unsigned long long, uint32_t> routes_; // runtime capture id -> the key of the pool it allocates from
  std::atomic<int> route_count_{0}; // routes_.size(), read without the lock by every allocation
  uint32_t next_pool_key_ = 1;
};

} // namespace torch_foo::allocator

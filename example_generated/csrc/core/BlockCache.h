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
//  - Private pools: every block belongs to a pool, 0 being the general cache. While a route to
//    private pool P is open (begin_allocate_to_pool) and its filter accepts a stream, that stream's
//    allocations come from P's own segments, and blocks of P go back to P when freed, during the
//    route or after it. Graph capture uses them (the graphs feature): a graph's replays
//    keep using the addresses it captured, so no other work may get them. Blocks of P are found by
//    pool, not by stream (every stream of a capture shares them). Users may share P (a use count);
//    when the last one lets it go (release_pool), P's whole free segments go back to the runtime at
//    the next empty_cache(), and its other segments as soon as their blocks are freed and the cache
//    is emptied again. While no route is open, an allocation pays one test of an empty map for them.
//  - empty_cache() hands every whole free segment back to the runtime. When the runtime is out of
//    memory, the allocator first does the same (after waiting for blocks held back by events) and
//    retries, then tries a segment of exactly the request, and only then raises
//    torch.OutOfMemoryError. The process goes on working after it.
//
// Observability, as CUDA's: every allocation and free is reported to the PyTorch profiler
// (c10::reportMemoryUsageToProfiler: profile_memory=True); segments() lists the segments and their
// blocks for memory snapshots; and an observer (AllocatorObserver, DeviceAllocator.h: the memory
// history of the profiler feature installs one while it records) sees every action, and each block
// keeps the stack trace the observer gave for its allocation. Without an observer, an allocation or
// free pays one atomic load for it.
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
#include <c10/macros/Macros.h>

#include "Device.h"
#include "DeviceAllocator.h"

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
  uint32_t pool = 0; // the private pool it belongs to (its key, see PrivatePool); 0: the general cache
  c10::StreamId lane = 0; // free blocks are ordered by it first: `stream`, or 0 in a private pool
  bool small = false; // which pool
  size_t size = 0;
  void* ptr = nullptr;
  size_t requested = 0; // bytes asked for, while allocated
  bool allocated = false;
  int pending_uses = 0; // recorded uses on other streams that have not completed yet
  std::vector<c10::Stream> uses; // other streams that used it (tensor.record_stream)
  Block* prev = nullptr; // neighbours in the same segment
  Block* next = nullptr;
  std::shared_ptr<c10::GatheredContext> context; // where it was allocated, if an observer gave it (else null)

  bool is_split() const {
    return prev != nullptr || next != nullptr;
  }
  bool is_free() const {
    return !allocated && pending_uses == 0;
  }
};

// Free blocks are kept per pool (the general cache of each device, each private pool) and looked
// up by stream (not in a private pool: its streams share its blocks, so their lane is 0), then size
// (best fit), then address.
inline c10::StreamId lane_of(uint32_t pool, c10::StreamId stream) {
  return pool != 0 ? 0 : stream;
}

// What a lookup asks for: the smallest block of `lane` of at least `size` bytes.
struct BlockWanted {
  c10::StreamId lane = 0;
  size_t size = 0;
};

struct BlockOrder {
  using is_transparent = void; // lower_bound(BlockWanted) needs no Block to compare with

  bool operator()(const Block* a, const Block* b) const {
    if (a->lane != b->lane) {
      return a->lane < b->lane;
    }
    if (a->size != b->size) {
      return a->size < b->size;
    }
    return std::less<const void*>()(a->ptr, b->ptr);
  }
  bool operator()(const Block* a, const BlockWanted& b) const {
    return a->lane != b.lane ? a->lane < b.lane : a->size < b.size;
  }
  bool operator()(const BlockWanted& a, const Block* b) const {
    return a.lane != b->lane ? a.lane < b->lane : a.size < b->size;
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

// A private pool (BlockCache.cpp): its blocks carry `key`, and its free blocks are its own.
struct PrivatePool {
  uint32_t key = 0;
  c10::DeviceIndex device = 0;
  int use_count = 0; // users (graphs) of it; 0: its segments go back to the runtime
  size_t segments = 0; // segments it holds
  FreeBlocks small;
  FreeBlocks large;

  FreeBlocks& pool(bool small_pool) {
    return small_pool ? small : large;
  }
};

// An open route to a private pool: allocations on the streams of `device` that `filter` accepts
// come from the pool whose key is `key`.
struct PoolRoute {
  c10::DeviceIndex device = 0;
  uint32_t key = 0;
  std::function<bool(c10::Stream)> filter;
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
  Block* malloc_block(c10::DeviceIndex device, c10::StreamId stream, size_t nbytes);
  // Frees the block at `ptr` (allocated by malloc_block); nothing for other pointers.
  void free(void* ptr);
  // Marks the allocated block at `ptr` as used on `stream` (tensor.record_stream), whose native
  // stream exists (native_stream()).
  void record_stream(void* ptr, c10::Stream stream);
  // Gives every whole free segment back to the runtime (empty_cache()).
  void empty_cache();
  // Every segment and its blocks, by device and address (memory snapshots).
  std::vector<SegmentInfo> segments();

  // Private pools (DeviceAllocator.h says what they are for).
  void begin_allocate_to_pool(
      c10::DeviceIndex device, uint64_t route, c10::MempoolId_t pool, std::function<bool(c10::Stream)> filter);
  void end_allocate_to_pool(uint64_t route);
  void release_pool(c10::MempoolId_t pool);

  // The observer of every action (DeviceAllocator.h); null: none.
  void set_observer(const AllocatorObserver* observer) {
    observer_.store(observer, std::memory_order_release);
  }

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
  // The free blocks of `pool` (a key; 0: the general cache of `device`), small or large. Caller
  // holds mutex_.
  FreeBlocks& free_blocks(c10::DeviceIndex device, uint32_t pool, bool small) {
    return C10_LIKELY(pool == 0) ? caches_[device].pool(small) : private_pool(pool)->pool(small);
  }
  Block* spare_block();
  void split(DeviceCache& cache, Block* block, size_t size);
  void record_uses(Block* block) noexcept;
  void make_free(Block* block, const AllocatorObserver* watcher);
  void process_pending_uses();
  void finish_use(const PendingUse& use);
  void release_cached_blocks(std::unique_lock<std::mutex>& lock);

  // MemoryLimit.cpp
  bool over_fraction(c10::DeviceIndex device, size_t size);
  void* device_malloc(c10::DeviceIndex device, size_t size);

  // The observer, or null (the usual case: one atomic load).
  const AllocatorObserver* observer() const {
    return observer_.load(std::memory_order_acquire);
  }
  // Tells `watcher` (observer(), loaded once per operation), if any, of an action on `block`, with
  // `context` if not null. Caller holds mutex_.
  static void note(
      const AllocatorObserver* watcher,
      AllocatorAction action,
      const Block* block,
      size_t size,
      const std::shared_ptr<c10::GatheredContext>* context = nullptr) {
    if (C10_UNLIKELY(watcher != nullptr)) {
      const auto address = reinterpret_cast<uintptr_t>(block->ptr);
      watcher->record({action, block->device, address, size, block->stream, context ? *context : nullptr});
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
  std::map<c10::MempoolId_t, PrivatePool> pools_; // private pools
  std::map<uint64_t, PoolRoute> routes_; // open routes, by the id their opener gave
  uint32_t next_pool_key_ = 1;
  std::atomic<const AllocatorObserver*> observer_{nullptr};
};

} // namespace torch_foo::allocator

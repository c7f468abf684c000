#include "DeviceAllocator.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <c10/core/DeviceGuard.h>

#include "Device.h"
#include "Exception.h"
#include "MemoryHistory.h"
#include "Stream.h"

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
namespace torch_foo {
namespace {

using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512; // requests are rounded up to a multiple of this
constexpr size_t kSmallSize = size_t{1} << 20; // requests up to this size come from the small pool
constexpr size_t kSmallSegment = size_t{2} << 20; // the segment size of the small pool
constexpr size_t kLargeRound = size_t{1} << 20; // large segments are multiples of this

size_t round_up(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

std::string format_bytes(size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return text;
}

// A range of device memory: a whole segment from the runtime, or a piece of one.
struct Block {
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0; // the stream it was allocated on
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

// Free blocks are looked up by stream, then size (best fit), then address.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) {
      return a->stream < b->stream;
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

template <typename Visit>
void for_each_stat(DeviceStats& s, const Visit& visit) {
  for (StatArray* array :
       {&s.allocation,
        &s.segment,
        &s.active,
        &s.inactive_split,
        &s.allocated_bytes,
        &s.reserved_bytes,
        &s.active_bytes,
        &s.inactive_split_bytes,
        &s.requested_bytes}) {
    for (auto& stat : *array) {
      visit(stat);
    }
  }
}

class FooDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Stream stream = current_stream_of_current_device(); // one runtime call for both
    const c10::DeviceIndex device = stream.device_index();
    const c10::Device where(c10::DeviceType::PrivateUse1, device);
    if (nbytes == 0) {
      return {nullptr, nullptr, &deleter, where};
    }
    auto context = memory_history::context_for(memory_history::Action::Alloc); // before the lock: takes the GIL
    void* ptr = malloc_block(device, stream.id(), nbytes, std::move(context))->ptr;
    return {ptr, ptr, &deleter, where}; // the context is the pointer, as raw_allocate expects
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &deleter;
  }

  // Storage clones: on the source device's current stream, so that the copy follows the work
  // that wrote the source, whichever device is current.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    fooPointerAttributes attributes{};
    FOO_CHECK(fooPointerGetAttributes(&attributes, src));
    TORCH_CHECK(attributes.device >= 0, "copy_data: ", src, " is not foo device memory");
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, attributes.device));
    FOO_CHECK(fooMemcpyAsync(dest, src, count, fooMemcpyDeviceToDevice, current_stream()));
  }

  bool initialized() override {
    return true;
  }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    std::unique_lock<std::mutex> lock(mutex_);
    release_cached_blocks(lock);
  }

  void recordStream(const c10::DataPtr& data, c10::Stream stream) override {
    if (data.get() == nullptr || data.get_deleter() != &deleter) {
      return;
    }
    native_stream(stream); // validates the stream and creates it, so that free() can record on it
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocated_.find(data.get());
    TORCH_INTERNAL_ASSERT(it != allocated_.end(), "record_stream: unknown foo allocation");
    Block* block = it->second;
    if (stream.device_index() == block->device && stream.id() == block->stream) {
      return; // its own stream: ordered anyway
    }
    if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
      block->uses.push_back(stream);
    }
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    std::lock_guard<std::mutex> lock(mutex_);
    return caches_[device].stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = caches_[device].stats;
    for_each_stat(s, [](c10::CachingAllocator::Stat& stat) { stat.reset_accumulated(); });
    s.num_alloc_retries = 0;
    s.num_ooms = 0;
    s.num_sync_all_streams = 0;
    s.num_device_alloc = 0;
    s.num_device_free = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    std::lock_guard<std::mutex> lock(mutex_);
    for_each_stat(caches_[device].stats, [](c10::CachingAllocator::Stat& stat) { stat.reset_peak(); });
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    size_t free = 0;
    size_t total = 0;
    FOO_CHECK(fooMemGetInfo(&free, &total));
    return {free, total};
  }

  // Every segment and its blocks, by device and address (memory snapshots).
  std::vector<SegmentInfo> segments() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::set<std::pair<c10::DeviceIndex, Block*>> heads; // first block of each segment
    const auto add_segment_of = [&](Block* block) {
      while (block->prev != nullptr) {
        block = block->prev;
      }
      heads.emplace(block->device, block);
    };
    for (DeviceCache& cache : caches_) {
      for (FreeBlocks* pool : {&cache.small, &cache.large}) {
        std::for_each(pool->begin(), pool->end(), add_segment_of);
      }
    }
    for (const auto& [ptr, block] : allocated_) {
      add_segment_of(block);
    }
    for (const PendingUse& use : pending_) {
      add_segment_of(use.block);
    }
    std::vector<SegmentInfo> result;
    for (const auto& [device, head] : heads) {
      SegmentInfo segment;
      segment.device = device;
      segment.address = reinterpret_cast<uintptr_t>(head->ptr);
      segment.stream = head->stream;
      segment.small = head->small;
      for (const Block* b = head; b != nullptr; b = b->next) {
        const bool active = b->allocated || b->pending_uses > 0;
        segment.blocks.push_back({b->size, b->requested, b->allocated, active, b->context});
        segment.total_size += b->size;
        segment.allocated_size += b->allocated ? b->size : 0;
        segment.active_size += active ? b->size : 0;
        segment.requested_size += active ? b->requested : 0;
      }
      result.push_back(std::move(segment));
    }
    return result;
  }

  void set_fraction(double fraction, c10::DeviceIndex device) {
    check_device_index(device);
    TORCH_CHECK(fraction >= 0 && fraction <= 1, "Invalid fraction value: ", fraction, ". Allowed range: 0~1");
    const size_t total = getMemoryInfo(device).second;
    std::lock_guard<std::mutex> lock(mutex_);
    fractions_[device] = fraction;
    limits_[device] = static_cast<size_t>(fraction * static_cast<double>(total));
  }

  double fraction(c10::DeviceIndex device) {
    check_device_index(device);
    std::lock_guard<std::mutex> lock(mutex_);
    return fractions_[device];
  }

  void* raw_alloc(size_t nbytes, c10::Stream stream) {
    native_stream(stream); // validates it
    if (nbytes == 0) {
      return nullptr;
    }
    auto context = memory_history::context_for(memory_history::Action::Alloc);
    void* ptr = malloc_block(stream.device_index(), stream.id(), nbytes, std::move(context))->ptr;
    std::lock_guard<std::mutex> lock(mutex_);
    raw_.insert(ptr);
    return ptr;
  }

  void raw_delete(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      TORCH_CHECK(
          raw_.erase(ptr) == 1,
          "invalid device pointer: ",
          ptr,
          " (not from caching_allocator_alloc, or already deleted)");
    }
    free(ptr);
  }

  static FooDeviceAllocator& instance() {
    // Never destroyed: tensors may be freed by other libraries' static destructors at exit.
    static auto* allocator = new FooDeviceAllocator();
    return *allocator;
  }

 private:
  static void deleter(void* ptr) {
    int bad_fork = 0;
    if (ptr == nullptr || fooIsInBadFork(&bad_fork) != fooSuccess || bad_fork != 0) {
      return; // a child forked after initialisation must not touch the device (or our locks)
    }
    instance().free(ptr);
  }

  Block* malloc_block(
      c10::DeviceIndex device, c10::StreamId stream, size_t nbytes, std::shared_ptr<c10::GatheredContext> context) {
    if (nbytes > (size_t{1} << 62)) {
      raise_out_of_memory(device, nbytes, 0, 0, "");
    }
    const size_t size = round_up(nbytes, kMinBlockSize);
    const bool small = size <= kSmallSize;
    std::unique_lock<std::mutex> lock(mutex_);
    DeviceCache& cache = caches_[device];
    process_pending_uses();
    Block* block = take_free_block(cache, stream, size, small);
    if (block == nullptr) {
      block = new_segment(lock, device, stream, size, small, nbytes);
      note(memory_history::Action::SegmentAlloc, block, block->size, context);
    }
    split(cache, block, size);
    block->allocated = true;
    block->requested = nbytes;
    allocated_.emplace(block->ptr, block);
    DeviceStats& s = cache.stats;
    add(s.allocation, small, 1);
    add(s.allocated_bytes, small, static_cast<int64_t>(block->size));
    add(s.active, small, 1);
    add(s.active_bytes, small, static_cast<int64_t>(block->size));
    add(s.requested_bytes, small, static_cast<int64_t>(nbytes));
    note(memory_history::Action::Alloc, block, nbytes, context);
    report_usage(block, static_cast<int64_t>(block->size));
    block->context = std::move(context);
    return block;
  }

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

  // The profiler's memory event for `block` (profile_memory=True). Caller holds mutex_.
  void report_usage(const Block* block, int64_t delta) {
    const DeviceStats& s = caches_[block->device].stats;
    const auto aggregate = static_cast<size_t>(StatType::AGGREGATE);
    c10::reportMemoryUsageToProfiler(
        block->ptr,
        delta,
        static_cast<size_t>(s.allocated_bytes[aggregate].current),
        static_cast<size_t>(s.reserved_bytes[aggregate].current),
        c10::Device(c10::DeviceType::PrivateUse1, block->device));
  }

  // The smallest free block of `stream` that fits, taken out of its pool.
  Block* take_free_block(DeviceCache& cache, c10::StreamId stream, size_t size, bool small) {
    FreeBlocks& pool = cache.pool(small);
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) {
      return nullptr;
    }
    Block* block = *it;
    pool.erase(it);
    if (block->is_split()) {
      add(cache.stats.inactive_split, small, -1);
      add(cache.stats.inactive_split_bytes, small, -static_cast<int64_t>(block->size));
    }
    return block;
  }

  Block* new_segment(
      std::unique_lock<std::mutex>& lock,
      c10::DeviceIndex device,
      c10::StreamId stream,
      size_t size,
      bool small,
      size_t nbytes) {
    DeviceCache& cache = caches_[device];
    size_t segment = small ? kSmallSegment : round_up(size, kLargeRound);
    void* ptr = device_malloc(device, segment);
    if (ptr == nullptr) {
      ++cache.stats.num_alloc_retries;
      release_cached_blocks(lock);
      ptr = device_malloc(device, segment);
    }
    if (ptr == nullptr && segment > size) {
      segment = size; // a nearly full device: a segment of exactly the (rounded) request
      ptr = device_malloc(device, segment);
    }
    if (ptr == nullptr) {
      // The runtime's own words, unless the fraction refused the request before the runtime saw it.
      const std::string reason = over_fraction(device, segment) ? "" : fooGetLastErrorMessage();
      ++cache.stats.num_ooms;
      const auto allocated = cache.stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
      const auto reserved = cache.stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
      const size_t limit = fractions_[device] < 1.0 ? limits_[device] : 0;
      lock.unlock();
      raise_out_of_memory(device, nbytes, static_cast<size_t>(allocated), static_cast<size_t>(reserved), reason, limit);
    }
    ++cache.stats.num_device_alloc;
    add(cache.stats.segment, small, 1);
    add(cache.stats.reserved_bytes, small, static_cast<int64_t>(segment));
    auto* block = new Block();
    block->device = device;
    block->stream = stream;
    block->small = small;
    block->size = segment;
    block->ptr = ptr;
    return block;
  }

  // A Block for the rest of a split one: a merge gives its Block back to spare_blocks_, so that a
  // small operator's allocation and free (a split, then a merge) make no heap allocation of their
  // own. Caller holds mutex_.
  Block* spare_block() {
    if (spare_blocks_.empty()) {
      return new Block();
    }
    Block* block = spare_blocks_.back();
    spare_blocks_.pop_back();
    *block = Block();
    return block;
  }

  // Leaves `size` bytes in `block` and returns the rest to the pool, if the rest is worth keeping
  // apart: any 512 bytes in the small pool, more than 1 MiB in the large one.
  void split(DeviceCache& cache, Block* block, size_t size) {
    const size_t rest = block->size - size;
    if (block->small ? rest < kMinBlockSize : rest <= kSmallSize) {
      return;
    }
    Block* remainder = spare_block();
    remainder->device = block->device;
    remainder->stream = block->stream;
    remainder->small = block->small;
    remainder->size = rest;
    remainder->ptr = static_cast<char*>(block->ptr) + size;
    remainder->prev = block;
    remainder->next = block->next;
    if (block->next != nullptr) {
      block->next->prev = remainder;
    }
    block->next = remainder;
    block->size = size;
    cache.pool(block->small).insert(remainder);
    add(cache.stats.inactive_split, block->small, 1);
    add(cache.stats.inactive_split_bytes, block->small, static_cast<int64_t>(rest));
  }

  void free(void* ptr) {
    auto context = memory_history::context_for(memory_history::Action::FreeRequested); // before the lock
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocated_.find(ptr);
    if (it == allocated_.end()) {
      return;
    }
    Block* block = it->second;
    allocated_.erase(it);
    DeviceStats& s = caches_[block->device].stats;
    add(s.allocation, block->small, -1);
    add(s.allocated_bytes, block->small, -static_cast<int64_t>(block->size));
    add(s.requested_bytes, block->small, -static_cast<int64_t>(block->requested));
    note(memory_history::Action::FreeRequested, block, block->requested, std::move(context));
    report_usage(block, -static_cast<int64_t>(block->size));
    block->allocated = false;
    if (!block->uses.empty()) {
      record_uses(block);
    }
    if (block->pending_uses == 0) {
      make_free(block);
    }
  }

  // Records an event on every other stream that used `block`; it is reused once they complete.
  // Called from deleters, so it reports nothing: if an event cannot be recorded, it waits.
  void record_uses(Block* block) noexcept {
    int previous = 0;
    (void)fooGetDevice(&previous);
    for (const c10::Stream& stream : block->uses) {
      fooStream_t handle = nullptr;
      try {
        handle = native_stream(stream); // exists: recordStream() created it
      } catch (...) {
        continue;
      }
      (void)fooSetDevice(stream.device_index());
      fooEvent_t event = nullptr;
      if (fooEventCreateWithFlags(&event, fooEventDisableTiming) == fooSuccess &&
          fooEventRecord(event, handle) == fooSuccess) {
        pending_.push_back({event, block});
        ++block->pending_uses;
      } else {
        if (event != nullptr) {
          (void)fooEventDestroy(event);
        }
        (void)fooStreamSynchronize(handle);
      }
    }
    block->uses.clear();
    (void)fooSetDevice(previous);
  }

  // Returns a block to its pool, merged with its free neighbours.
  void make_free(Block* block) {
    note(memory_history::Action::FreeCompleted, block, block->requested);
    block->requested = 0;
    block->context.reset();
    DeviceCache& cache = caches_[block->device];
    DeviceStats& s = cache.stats;
    const bool small = block->small;
    add(s.active, small, -1);
    add(s.active_bytes, small, -static_cast<int64_t>(block->size));
    FreeBlocks& pool = cache.pool(small);
    for (Block* neighbour : {block->prev, block->next}) {
      if (neighbour == nullptr || !neighbour->is_free()) {
        continue;
      }
      pool.erase(neighbour);
      add(s.inactive_split, small, -1);
      add(s.inactive_split_bytes, small, -static_cast<int64_t>(neighbour->size));
      Block* first = neighbour == block->prev ? neighbour : block;
      Block* second = neighbour == block->prev ? block : neighbour;
      first->size += second->size;
      first->next = second->next;
      if (second->next != nullptr) {
        second->next->prev = first;
      }
      spare_blocks_.push_back(second);
      block = first;
    }
    if (block->is_split()) {
      add(s.inactive_split, small, 1);
      add(s.inactive_split_bytes, small, static_cast<int64_t>(block->size));
    }
    pool.insert(block);
  }

  // Frees the blocks whose recorded uses have completed (oldest first). Caller holds mutex_.
  void process_pending_uses() {
    while (!pending_.empty()) {
      const PendingUse use = pending_.front();
      if (fooEventQuery(use.event) == fooErrorNotReady) {
        break;
      }
      pending_.pop_front();
      finish_use(use);
    }
  }

  void finish_use(const PendingUse& use) {
    (void)fooEventDestroy(use.event);
    if (--use.block->pending_uses == 0) {
      make_free(use.block);
    }
  }

  // Waits for blocks held back by recorded uses, then gives every whole free segment back to the
  // runtime. Caller holds `lock`; it is released while waiting and freeing (which synchronises).
  void release_cached_blocks(std::unique_lock<std::mutex>& lock) {
    std::deque<PendingUse> waiting;
    waiting.swap(pending_);
    if (!waiting.empty()) {
      lock.unlock();
      for (const PendingUse& use : waiting) {
        (void)fooEventSynchronize(use.event);
      }
      lock.lock();
      for (const PendingUse& use : waiting) {
        ++caches_[use.block->device].stats.num_sync_all_streams;
        finish_use(use);
      }
    }
    std::vector<Block*> segments;
    for (DeviceCache& cache : caches_) {
      for (FreeBlocks* pool : {&cache.small, &cache.large}) {
        for (auto it = pool->begin(); it != pool->end();) {
          Block* block = *it;
          if (block->is_split()) {
            ++it;
            continue;
          }
          it = pool->erase(it);
          add(cache.stats.segment, block->small, -1);
          add(cache.stats.reserved_bytes, block->small, -static_cast<int64_t>(block->size));
          ++cache.stats.num_device_free;
          note(memory_history::Action::SegmentFree, block, block->size);
          segments.push_back(block);
        }
      }
    }
    if (segments.empty()) {
      return;
    }
    lock.unlock();
    fooError_t error = fooSuccess;
    for (Block* block : segments) {
      const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, block->device));
      const fooError_t result = fooFree(block->ptr);
      error = error == fooSuccess ? result : error;
      delete block;
    }
    lock.lock();
    FOO_CHECK(error);
  }

  // Whether a new segment of `size` bytes would take the cache past its fraction of `device`.
  // Caller holds mutex_.
  bool over_fraction(c10::DeviceIndex device, size_t size) {
    const auto reserved = caches_[device].stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
    return fractions_[device] < 1.0 && static_cast<size_t>(reserved) + size > limits_[device];
  }

  // Memory from the runtime, or nullptr if the device is out of memory or the segment would take
  // the cache past its fraction of the device. Caller holds mutex_.
  void* device_malloc(c10::DeviceIndex device, size_t size) {
    if (over_fraction(device, size)) {
      return nullptr;
    }
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    void* ptr = nullptr;
    const fooError_t error = fooMalloc(&ptr, size);
    if (error == fooErrorMemoryAllocation) {
      return nullptr;
    }
    FOO_CHECK(error);
    return ptr;
  }

  // `reason`: what the runtime said about the last failed allocation ("" if none was tried).
  [[noreturn]] static void raise_out_of_memory(
      c10::DeviceIndex device,
      size_t nbytes,
      size_t allocated,
      size_t reserved,
      const std::string& reason,
      size_t limit = 0) {
    size_t free = 0;
    size_t total = 0;
    {
      const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
      (void)fooMemGetInfo(&free, &total);
    }
    if (memory_history::is_recording()) { // an "oom" entry: the address field holds the free bytes
      memory_history::record({memory_history::Action::Oom, device, free, nbytes, 0, 0, nullptr});
    }
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        false,
        "foo out of memory. Tried to allocate ",
        format_bytes(nbytes),
        " on device foo:",
        static_cast<int>(device),
        ", which has a total capacity of ",
        format_bytes(total),
        " of which ",
        format_bytes(free),
        " is free. PyTorch holds ",
        format_bytes(allocated),
        " in tensors and ",
        format_bytes(reserved - std::min(reserved, allocated)),
        " more in its cache (reserved but unallocated).",
        limit == 0 ? "" : " This process may use at most ",
        limit == 0 ? "" : format_bytes(limit),
        limit == 0 ? "" : " of it (torch.foo.set_per_process_memory_fraction).",
        " The emulated capacity is set by FOO_DEVICE_MEMORY.",
        reason.empty() ? "" : " The runtime said: ",
        reason);
  }

  std::mutex mutex_; // guards everything below
  std::array<DeviceCache, kMaxDevices> caches_;
  std::unordered_map<void*, Block*> allocated_;
  std::deque<PendingUse> pending_;
  std::vector<Block*> spare_blocks_; // Blocks of merged pieces, for the next split (spare_block())
  std::set<void*> raw_; // pointers handed out by raw_alloc, not yet deleted
  std::array<double, kMaxDevices> fractions_ = [] {
    std::array<double, kMaxDevices> ones{};
    ones.fill(1.0);
    return ones;
  }();
  std::array<size_t, kMaxDevices> limits_{}; // bytes the cache may reserve per device (0: no limit of ours)
};

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &FooDeviceAllocator::instance());

} // namespace

c10::DeviceAllocator* device_allocator() {
  return &FooDeviceAllocator::instance();
}

std::vector<SegmentInfo> memory_segments() {
  return FooDeviceAllocator::instance().segments();
}

void set_memory_fraction(double fraction, c10::DeviceIndex device) {
  FooDeviceAllocator::instance().set_fraction(fraction, device);
}

double memory_fraction(c10::DeviceIndex device) {
  return FooDeviceAllocator::instance().fraction(device);
}

void* raw_alloc(size_t nbytes, c10::Stream stream) {
  return FooDeviceAllocator::instance().raw_alloc(nbytes, stream);
}

void raw_delete(void* ptr) {
  FooDeviceAllocator::instance().raw_delete(ptr);
}

void resize_storage_bytes(c10::StorageImpl* storage, size_t size_bytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  c10::Allocator* allocator = storage->allocator();
  TORCH_CHECK(allocator != nullptr, "Trying to resize storage without an allocator");
  const c10::DeviceGuard guard(storage->device());
  c10::DataPtr data = allocator->allocate(size_bytes);
  const size_t keep = std::min(storage->nbytes(), size_bytes);
  if (storage->data() != nullptr && keep > 0) {
    const auto kind = fooMemcpyDeviceToDevice;
    FOO_CHECK(fooMemcpyAsync(data.get(), storage->data(), keep, kind, current_stream()));
  }
  storage->set_data_ptr_noswap(std::move(data));
  storage->set_nbytes(size_bytes);
}

} // namespace torch_foo

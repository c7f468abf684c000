// The caching allocator's blocks (BlockCache.h says how the cache works): best fit per stream,
// splitting and merging, uses on other streams, and giving whole segments back to the runtime.
#include "BlockCache.h"

#include <algorithm>

#include <c10/core/DeviceGuard.h>

#include "Exception.h"
#include "Stream.h"

namespace torch_foo::allocator {
namespace {

size_t round_up(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

} // namespace

BlockCache& BlockCache::instance() {
  static auto* cache = new BlockCache();
  return *cache;
}

Block* BlockCache::malloc_block(c10::DeviceIndex device, c10::StreamId stream, size_t nbytes) {
  if (nbytes > (size_t{1} << 62)) {
    raise_out_of_memory(device, nbytes, 0, 0, "");
  }
  const size_t size = round_up(nbytes, kMinBlockSize);
  const bool small = size <= kSmallSize;
  const AllocatorObserver* watcher = observer();
  std::shared_ptr<c10::GatheredContext> context;
  if (C10_UNLIKELY(watcher != nullptr)) {
    context = watcher->context_for(AllocatorAction::Alloc); // before the lock: it may take the GIL
  }
  std::unique_lock<std::mutex> lock(mutex_);
  const uint32_t pool = C10_UNLIKELY(!routes_.empty()) ? pool_for(device, stream) : 0;
  DeviceCache& cache = caches_[device];
  process_pending_uses();
  Block* block = take_free_block(cache, pool, stream, size, small);
  if (block == nullptr) {
    block = new_segment(lock, device, pool, stream, size, small, nbytes);
    note(watcher, AllocatorAction::SegmentAlloc, block, block->size, &context);
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
  note(watcher, AllocatorAction::Alloc, block, nbytes, &context);
  report_usage(block, static_cast<int64_t>(block->size));
  if (C10_UNLIKELY(context != nullptr)) {
    block->context = std::move(context);
  }
  return block;
}

// The smallest free block of `stream` (of private pool `private_key`, if not 0) that fits, taken out of its pool.
Block* BlockCache::take_free_block(
    DeviceCache& cache, uint32_t private_key, c10::StreamId stream, size_t size, bool small) {
  FreeBlocks& pool = private_key == 0 ? cache.pool(small) : private_pool(private_key)->pool(small);
  const BlockWanted wanted{lane_of(private_key, stream), size};
  auto it = pool.lower_bound(wanted);
  if (it == pool.end() || (*it)->lane != wanted.lane) {
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

Block* BlockCache::new_segment(
    std::unique_lock<std::mutex>& lock,
    c10::DeviceIndex device,
    uint32_t pool,
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
  block->pool = pool;
  block->lane = lane_of(pool, stream);
  if (PrivatePool* owner = private_pool(pool); owner != nullptr) {
    ++owner->segments;
  }
  block->stream = stream;
  block->small = small;
  block->size = segment;
  block->ptr = ptr;
  return block;
}

// A Block for the rest of a split one: a merge gives its Block back to spare_blocks_, so that a
// small operator's allocation and free (a split, then a merge) make no heap allocation of their
// own. Caller holds mutex_.
Block* BlockCache::spare_block() {
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
void BlockCache::split(DeviceCache& cache, Block* block, size_t size) {
  const size_t rest = block->size - size;
  if (block->small ? rest < kMinBlockSize : rest <= kSmallSize) {
    return;
  }
  Block* remainder = spare_block();
  remainder->device = block->device;
  remainder->stream = block->stream;
  remainder->pool = block->pool;
  remainder->lane = block->lane;
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
  free_blocks(block->device, block->pool, block->small).insert(remainder);
  add(cache.stats.inactive_split, block->small, 1);
  add(cache.stats.inactive_split_bytes, block->small, static_cast<int64_t>(rest));
}

void BlockCache::free(void* ptr) {
  const AllocatorObserver* watcher = observer();
  std::shared_ptr<c10::GatheredContext> context;
  if (C10_UNLIKELY(watcher != nullptr)) {
    context = watcher->context_for(AllocatorAction::FreeRequested); // before the lock: it may take the GIL
  }
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
  note(watcher, AllocatorAction::FreeRequested, block, block->requested, &context);
  report_usage(block, -static_cast<int64_t>(block->size));
  block->allocated = false;
  if (!block->uses.empty()) {
    record_uses(block);
  }
  if (block->pending_uses == 0) {
    make_free(block, watcher);
  }
}

void BlockCache::record_stream(void* ptr, c10::Stream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  TORCH_INTERNAL_ASSERT(it != allocated_.end(), "record_stream: unknown foo allocation");
  Block* block = it->second;
  if (stream.device_index() == block->device && stream.id() == block->stream) {
    return; // its own stream: ordered anyway
  }
  if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
    block->uses.push_back(stream);
  }
}

void BlockCache::empty_cache() {
  std::unique_lock<std::mutex> lock(mutex_);
  release_cached_blocks(lock);
}

// Records an event on every other stream that used `block`; it is reused once they complete.
// Called from deleters, so it reports nothing: if an event cannot be recorded, it waits.
void BlockCache::record_uses(Block* block) noexcept {
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
void BlockCache::make_free(Block* block, const AllocatorObserver* watcher) {
  note(watcher, AllocatorAction::FreeCompleted, block, block->requested);
  block->requested = 0;
  if (C10_UNLIKELY(block->context != nullptr)) {
    block->context.reset();
  }
  DeviceCache& cache = caches_[block->device];
  DeviceStats& s = cache.stats;
  const bool small = block->small;
  add(s.active, small, -1);
  add(s.active_bytes, small, -static_cast<int64_t>(block->size));
  FreeBlocks& pool = free_blocks(block->device, block->pool, small);
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
void BlockCache::process_pending_uses() {
  while (!pending_.empty()) {
    const PendingUse use = pending_.front();
    if (fooEventQuery(use.event) == fooErrorNotReady) {
      break;
    }
    pending_.pop_front();
    finish_use(use);
  }
}

void BlockCache::finish_use(const PendingUse& use) {
  (void)fooEventDestroy(use.event);
  if (--use.block->pending_uses == 0) {
    make_free(use.block, observer());
  }
}

// Waits for blocks held back by recorded uses, then gives every whole free segment back to the
// runtime. Caller holds `lock`; it is released while waiting and freeing (which synchronises).
void BlockCache::release_cached_blocks(std::unique_lock<std::mutex>& lock) {
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
  const auto release = [&](FreeBlocks& blocks) { // the whole segments among `blocks`
    for (auto it = blocks.begin(); it != blocks.end();) {
      Block* block = *it;
      if (block->is_split()) {
        ++it; // a piece of a segment
        continue;
      }
      it = blocks.erase(it);
      DeviceStats& s = caches_[block->device].stats;
      add(s.segment, block->small, -1);
      add(s.reserved_bytes, block->small, -static_cast<int64_t>(block->size));
      ++s.num_device_free;
      note(observer(), AllocatorAction::SegmentFree, block, block->size);
      segments.push_back(block);
    }
  };
  for (DeviceCache& cache : caches_) {
    release(cache.small);
    release(cache.large);
  }
  for (auto& [id, pool] : pools_) {
    if (pool.use_count == 0) { // a pool still in use keeps its segments
      release(pool.small);
      release(pool.large);
    }
  }
  for (Block* block : segments) {
    if (PrivatePool* owner = private_pool(block->pool); owner != nullptr) {
      --owner->segments;
    }
  }
  const auto routed = [this](uint32_t key) {
    return std::any_of(routes_.begin(), routes_.end(), [key](const auto& route) { return route.second.key == key; });
  };
  for (auto it = pools_.begin(); it != pools_.end();) { // pools no one uses or routes to and that hold nothing
    const PrivatePool& pool = it->second;
    it = pool.use_count == 0 && pool.segments == 0 && !routed(pool.key) ? pools_.erase(it) : std::next(it);
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

// Every segment and its blocks, by device and address (memory snapshots).
std::vector<SegmentInfo> BlockCache::segments() {
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
  for (auto& [id, pool] : pools_) {
    for (FreeBlocks* blocks : {&pool.small, &pool.large}) {
      std::for_each(blocks->begin(), blocks->end(), add_segment_of);
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
    for (const auto& [id, pool] : pools_) {
      if (pool.key == head->pool && head->pool != 0) {
        segment.pool = id;
      }
    }
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

// ---- private pools -------------------------------------------------------------------------------

// The pool allocations on `stream` come from: that of the first open route of `device` whose filter
// accepts the stream, else the general cache (0). Asked only while a route is open (then each
// filter costs what it costs: graph capture's asks the runtime whether the stream captures). Caller
// holds mutex_.
uint32_t BlockCache::pool_for(c10::DeviceIndex device, c10::StreamId stream) {
  const c10::Stream which(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), stream);
  for (const auto& [id, route] : routes_) {
    if (route.device == device && route.filter(which)) {
      return route.key;
    }
  }
  return 0;
}

// The pool whose key is `key`, or null (the general cache, 0). Caller holds mutex_.
PrivatePool* BlockCache::private_pool(uint32_t key) {
  if (key == 0) {
    return nullptr;
  }
  for (auto& [id, pool] : pools_) {
    if (pool.key == key) {
      return &pool;
    }
  }
  return nullptr;
}

void BlockCache::begin_allocate_to_pool(
    c10::DeviceIndex device, uint64_t route, c10::MempoolId_t id, std::function<bool(c10::Stream)> filter) {
  TORCH_CHECK(
      filter != nullptr,
      "begin_allocate_to_pool: a route to memory pool (",
      id.first,
      ", ",
      id.second,
      ") needs a filter");
  TORCH_CHECK(
      id.first != 0 || id.second != 0,
      "begin_allocate_to_pool: memory pool (0, 0) is the general cache, not a private pool");
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(routes_.count(route) == 0, "begin_allocate_to_pool: route ", route, " is already open");
  auto [it, created] = pools_.try_emplace(id);
  PrivatePool& pool = it->second;
  if (created) {
    pool.key = next_pool_key_++;
    pool.device = device;
  }
  TORCH_CHECK(
      pool.device == device,
      "memory pool (",
      id.first,
      ", ",
      id.second,
      ") belongs to foo:",
      static_cast<int>(pool.device),
      ", not to foo:",
      static_cast<int>(device));
  ++pool.use_count;
  routes_[route] = PoolRoute{device, pool.key, std::move(filter)};
}

void BlockCache::end_allocate_to_pool(uint64_t route) {
  std::lock_guard<std::mutex> lock(mutex_);
  routes_.erase(route);
}

void BlockCache::release_pool(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(id);
  if (it != pools_.end() && it->second.use_count > 0) {
    --it->second.use_count;
  }
}

} // namespace torch_foo::allocator

// The caching allocator's statistics (torch.foo.memory_stats, as torch.cuda.memory_stats: BlockCache.h
// says what each counts), and its reports to the profiler (profile_memory=True). (What an observer
// sees, DeviceAllocator.h: BlockCache::note.)
#include "BlockCache.h"

namespace torch_foo::allocator {
namespace {

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

} // namespace

DeviceStats BlockCache::stats(c10::DeviceIndex device) {
  check_device_index(device);
  std::lock_guard<std::mutex> lock(mutex_);
  return caches_[device].stats;
}

void BlockCache::reset_accumulated_stats(c10::DeviceIndex device) {
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

void BlockCache::reset_peak_stats(c10::DeviceIndex device) {
  check_device_index(device);
  std::lock_guard<std::mutex> lock(mutex_);
  for_each_stat(caches_[device].stats, [](c10::CachingAllocator::Stat& stat) { stat.reset_peak(); });
}

// The profiler's memory event for `block` (profile_memory=True). Caller holds mutex_.
void BlockCache::report_usage(const Block* block, int64_t delta) {
  const DeviceStats& s = caches_[block->device].stats;
  const auto aggregate = static_cast<size_t>(StatType::AGGREGATE);
  c10::reportMemoryUsageToProfiler(
      block->ptr,
      delta,
      static_cast<size_t>(s.allocated_bytes[aggregate].current),
      static_cast<size_t>(s.reserved_bytes[aggregate].current),
      c10::Device(c10::DeviceType::PrivateUse1, block->device));
}

} // namespace torch_foo::allocator

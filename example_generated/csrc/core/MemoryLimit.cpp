// Where the caching allocator's segments come from (BlockCache.h): the runtime, within the per-process
// memory fraction (torch.foo.set_per_process_memory_fraction), and the out-of-memory error
// that names both when a request fails.
#include "BlockCache.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include <c10/core/DeviceGuard.h>

#include "Exception.h"

namespace torch_foo::allocator {
namespace {

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

} // namespace

std::pair<size_t, size_t> memory_info(c10::DeviceIndex device) {
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  size_t free = 0;
  size_t total = 0;
  FOO_CHECK(fooMemGetInfo(&free, &total));
  return {free, total};
}

// Whether a new segment of `size` bytes would take the cache past its fraction of `device`.
// Caller holds mutex_.
bool BlockCache::over_fraction(c10::DeviceIndex device, size_t size) {
  const auto reserved = caches_[device].stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
  return fractions_[device] < 1.0 && static_cast<size_t>(reserved) + size > limits_[device];
}

// Memory from the runtime, or nullptr if the device is out of memory or the segment would take
// the cache past its fraction of the device. Caller holds mutex_.
void* BlockCache::device_malloc(c10::DeviceIndex device, size_t size) {
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
void BlockCache::raise_out_of_memory(
    c10::DeviceIndex device,
    size_t nbytes,
    size_t allocated,
    size_t reserved,
    const std::string& reason,
    size_t limit) {
  size_t free = 0;
  size_t total = 0;
  {
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    (void)fooMemGetInfo(&free, &total);
  }
  if (const AllocatorObserver* watcher = instance().observer(); watcher != nullptr) {
    watcher->record({AllocatorAction::Oom, device, free, nbytes, 0, nullptr}); // the address field: free bytes
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

void BlockCache::set_fraction(double fraction, c10::DeviceIndex device) {
  check_device_index(device);
  TORCH_CHECK(fraction >= 0 && fraction <= 1, "Invalid fraction value: ", fraction, ". Allowed range: 0~1");
  const size_t total = memory_info(device).second;
  std::lock_guard<std::mutex> lock(mutex_);
  fractions_[device] = fraction;
  limits_[device] = static_cast<size_t>(fraction * static_cast<double>(total));
}

double BlockCache::fraction(c10::DeviceIndex device) {
  check_device_index(device);
  std::lock_guard<std::mutex> lock(mutex_);
  return fractions_[device];
}

} // namespace torch_foo::allocator

#include "DeviceAllocator.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <string>

#include <c10/core/DeviceGuard.h>

#include "Device.h"
#include "Exception.h"
#include "Launch.h"

namespace torch_foo {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMaxDevices = 16;
constexpr size_t kSmallSize = size_t{1} << 20; // blocks up to 1 MiB count as the small pool

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

class FooDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex device = current_device();
    void* ptr = nullptr;
    if (nbytes > 0) {
      const fooError_t error = fooMalloc(&ptr, nbytes);
      if (error == fooErrorMemoryAllocation) {
        raise_out_of_memory(device, nbytes);
      }
      FOO_CHECK(error);
      record(device, block_size(ptr), nbytes, +1);
    }
    return {ptr, ptr, &free_block, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_block;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    FOO_CHECK(fooMemcpyAsync(dest, src, count, fooMemcpyDeviceToDevice, current_stream()));
  }

  bool initialized() override {
    return true;
  }

  // Nothing is cached: every block went back to the runtime when it was freed.
  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {}

  // Blocks are returned to the runtime on free, and fooFree waits for pending work, so
  // no stream can still be using a block that is handed out again.
  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_[device];
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = stats_[device];
    for (auto* array :
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
        stat.reset_accumulated();
      }
    }
    s.num_alloc_retries = 0;
    s.num_ooms = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = stats_[device];
    for (auto* array :
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
        stat.reset_peak();
      }
    }
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    size_t free = 0;
    size_t total = 0;
    FOO_CHECK(fooMemGetInfo(&free, &total));
    return {free, total};
  }

 private:
  static size_t block_size(void* ptr) {
    fooPointerAttributes attributes{};
    FOO_CHECK(fooPointerGetAttributes(&attributes, ptr));
    return attributes.size;
  }

  static void free_block(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    fooPointerAttributes attributes{};
    if (fooPointerGetAttributes(&attributes, ptr) == fooSuccess && attributes.device >= 0) {
      instance().record(static_cast<c10::DeviceIndex>(attributes.device), attributes.size, 0, -1);
    }
    fooFree(ptr); // a deleter cannot throw; the registry check above already passed
  }

  static FooDeviceAllocator& instance();

  void record(c10::DeviceIndex device, size_t size, size_t requested, int sign) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = stats_[device];
    const auto pool = static_cast<size_t>(size <= kSmallSize ? StatType::SMALL_POOL : StatType::LARGE_POOL);
    for (const size_t type : {static_cast<size_t>(StatType::AGGREGATE), pool}) {
      if (sign > 0) {
        s.allocation[type].increase(1);
        s.segment[type].increase(1);
        s.active[type].increase(1);
        s.allocated_bytes[type].increase(size);
        s.reserved_bytes[type].increase(size);
        s.active_bytes[type].increase(size);
        s.requested_bytes[type].increase(requested);
      } else {
        s.allocation[type].decrease(1);
        s.segment[type].decrease(1);
        s.active[type].decrease(1);
        s.allocated_bytes[type].decrease(size);
        s.reserved_bytes[type].decrease(size);
        s.active_bytes[type].decrease(size);
      }
    }
  }

  [[noreturn]] void raise_out_of_memory(c10::DeviceIndex device, size_t nbytes) {
    size_t free = 0;
    size_t total = 0;
    fooMemGetInfo(&free, &total);
    size_t allocated = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_[device].num_ooms;
      allocated = stats_[device].allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
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
        " is free; PyTorch holds ",
        format_bytes(allocated),
        " in tensors. The emulated capacity is set by FOO_DEVICE_MEMORY.");
  }

  std::mutex mutex_;
  std::array<DeviceStats, kMaxDevices> stats_;
};

FooDeviceAllocator global_allocator;

FooDeviceAllocator& FooDeviceAllocator::instance() {
  return global_allocator;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &global_allocator);

} // namespace

c10::DeviceAllocator* device_allocator() {
  return &global_allocator;
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

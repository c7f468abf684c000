// The caching allocator as PyTorch calls it (DeviceAllocator.h): c10::DeviceAllocator over the block
// cache (BlockCache.h), the raw blocks of torch.foo.caching_allocator_alloc, and storage resizing.
#include "DeviceAllocator.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

#include <c10/core/DeviceGuard.h>

#include "BlockCache.h"
#include "Device.h"
#include "Exception.h"
#include "Stream.h"

namespace torch_foo {
namespace {

using allocator::BlockCache;

class FooDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Stream stream = current_stream_of_current_device(); // one runtime call for both
    const c10::DeviceIndex device = stream.device_index();
    const c10::Device where(c10::DeviceType::PrivateUse1, device);
    if (nbytes == 0) {
      return {nullptr, nullptr, &deleter, where};
    }
    void* ptr = cache().malloc_block(device, stream.id(), nbytes)->ptr;
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
    cache().empty_cache();
  }

  void recordStream(const c10::DataPtr& data, c10::Stream stream) override {
    if (data.get() == nullptr || data.get_deleter() != &deleter) {
      return;
    }
    native_stream(stream); // validates the stream and creates it, so that free() can record on it
    cache().record_stream(data.get(), stream);
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return cache().stats(device);
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    cache().reset_accumulated_stats(device);
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    cache().reset_peak_stats(device);
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    return allocator::memory_info(device);
  }

  // torch.foo.caching_allocator_alloc: a block of the cache that no tensor owns, until raw_delete.
  void* raw_alloc(size_t nbytes, c10::Stream stream) {
    native_stream(stream); // validates it
    if (nbytes == 0) {
      return nullptr;
    }
    void* ptr = cache().malloc_block(stream.device_index(), stream.id(), nbytes)->ptr;
    std::lock_guard<std::mutex> lock(raw_mutex_);
    raw_.insert(ptr);
    return ptr;
  }

  void raw_delete(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    {
      std::lock_guard<std::mutex> lock(raw_mutex_);
      TORCH_CHECK(
          raw_.erase(ptr) == 1,
          "invalid device pointer: ",
          ptr,
          " (not from caching_allocator_alloc, or already deleted)");
    }
    cache().free(ptr);
  }

  static FooDeviceAllocator& instance() {
    // Never destroyed: tensors may be freed by other libraries' static destructors at exit.
    static auto* allocator = new FooDeviceAllocator();
    return *allocator;
  }

 private:
  static BlockCache& cache() {
    return BlockCache::instance();
  }

  static void deleter(void* ptr) {
    int bad_fork = 0;
    if (ptr == nullptr || fooIsInBadFork(&bad_fork) != fooSuccess || bad_fork != 0) {
      return; // a child forked after initialisation must not touch the device (or our locks)
    }
    cache().free(ptr);
  }

  std::mutex raw_mutex_; // guards raw_
  std::set<void*> raw_; // pointers handed out by raw_alloc, not yet deleted
};

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &FooDeviceAllocator::instance());

} // namespace

c10::DeviceAllocator* device_allocator() {
  return &FooDeviceAllocator::instance();
}

std::vector<SegmentInfo> memory_segments() {
  return BlockCache::instance().segments();
}

void set_allocator_observer(const AllocatorObserver* observer) {
  BlockCache::instance().set_observer(observer);
}

void set_memory_fraction(double fraction, c10::DeviceIndex device) {
  BlockCache::instance().set_fraction(fraction, device);
}

double memory_fraction(c10::DeviceIndex device) {
  return BlockCache::instance().fraction(device);
}

void* raw_alloc(size_t nbytes, c10::Stream stream) {
  return FooDeviceAllocator::instance().raw_alloc(nbytes, stream);
}

void raw_delete(void* ptr) {
  FooDeviceAllocator::instance().raw_delete(ptr);
}

c10::MempoolId_t new_pool_id(bool for_graph) {
  static std::atomic<c10::CaptureId_t> next{1};
  const c10::CaptureId_t id = next.fetch_add(1, std::memory_order_relaxed);
  return for_graph ? c10::MempoolId_t{id, 0} : c10::MempoolId_t{0, id};
}

void begin_allocate_to_pool(
    c10::DeviceIndex device, uint64_t route, c10::MempoolId_t pool, std::function<bool(c10::Stream)> filter) {
  BlockCache::instance().begin_allocate_to_pool(device, route, pool, std::move(filter));
}

void end_allocate_to_pool(uint64_t route) {
  BlockCache::instance().end_allocate_to_pool(route);
}

void release_pool(c10::MempoolId_t pool) {
  BlockCache::instance().release_pool(pool);
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

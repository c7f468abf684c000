#include "HostAllocator.h"

#include <utility>

// The header aligns its members to std::hardware_destructive_interference_size, which GCC warns
// may differ between compilers; PyTorch and this extension are built with the same one.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winterference-size"
#include <ATen/core/CachingHostAllocator.h>
#pragma GCC diagnostic pop

#include <c10/core/DeviceGuard.h>

#include "Device.h"
#include "Exception.h"
#include "Stream.h"

namespace torch_foo {
namespace {

// A runtime event owned by the host allocator (recorded after a copy that used a pinned block).
struct HostEvent {
  fooEvent_t event = nullptr;

  HostEvent() = default;
  explicit HostEvent(fooEvent_t e) : event(e) {}
  HostEvent(HostEvent&& other) noexcept : event(std::exchange(other.event, nullptr)) {}
  HostEvent& operator=(HostEvent&& other) noexcept {
    std::swap(event, other.event);
    return *this;
  }
  HostEvent(const HostEvent&) = delete;
  HostEvent& operator=(const HostEvent&) = delete;
  ~HostEvent() {
    if (event != nullptr) {
      (void)fooEventDestroy(event);
    }
  }
};

struct FooHostAllocatorImpl final : public at::CachingHostAllocatorImpl<c10::Stream, HostEvent> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    const fooError_t error = fooMallocHost(ptr, size);
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        error != fooErrorMemoryAllocation,
        "foo: out of pinned host memory (tried to allocate ",
        size,
        " bytes)");
    FOO_CHECK(error);
  }

  void free_block(at::HostBlock<c10::Stream>* block) override {
    (void)fooFreeHost(block->ptr_);
  }

  void record_stream(std::optional<std::vector<HostEvent>>& events, c10::Stream stream) override {
    const c10::DeviceGuard guard(stream.device());
    fooEvent_t event = nullptr;
    FOO_CHECK(fooEventCreateWithFlags(&event, fooEventDisableTiming));
    HostEvent owned(event);
    FOO_CHECK(fooEventRecord(event, native_stream(stream)));
    events->push_back(std::move(owned));
  }

  bool query_event(HostEvent& event) override {
    const fooError_t error = fooEventQuery(event.event);
    if (error == fooErrorNotReady) {
      return false;
    }
    FOO_CHECK(error);
    return true;
  }

  c10::Stream get_current_stream() const override {
    return current_stream_of_current_device();
  }

  bool stream_is_capturing(c10::Stream /*stream*/) const override {
    return false; // no graph capture
  }
};

void free_pinned(void* ctx);

struct FooHostAllocator final : public at::CachingHostAllocatorInterface<FooHostAllocatorImpl, free_pinned> {};

FooHostAllocator& instance() {
  static auto* allocator = new FooHostAllocator(); // never destroyed, like the device allocator
  return *allocator;
}

void free_pinned(void* ctx) {
  int bad_fork = 0;
  if (ctx == nullptr || fooIsInBadFork(&bad_fork) != fooSuccess || bad_fork != 0) {
    return; // a child forked after initialisation must not touch the runtime
  }
  instance().free(ctx);
}

const bool host_allocator_registered = [] {
  at::setHostAllocator(c10::DeviceType::PrivateUse1, &instance());
  return true;
}();

} // namespace

c10::Allocator* host_allocator() {
  return &instance();
}

bool is_pinned(const void* ptr) {
  fooPointerAttributes attributes{};
  return fooPointerGetAttributes(&attributes, ptr) == fooSuccess && attributes.type == fooMemoryTypeHost;
}

void record_host_use(const c10::DataPtr& data, c10::Stream stream) {
  instance().record_event(data.get(), data.get_context(), stream);
}

} // namespace torch_foo

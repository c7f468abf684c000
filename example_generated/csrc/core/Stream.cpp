#include "Stream.h"

#include <array>
#include <atomic>
#include <mutex>

#include <c10/core/DeviceGuard.h>

#include "Device.h"
#include "Exception.h"

namespace torch_foo {
namespace {

constexpr int kPoolSize = 8; // streams per device and priority, handed out round-robin
constexpr int kPriorities = 2; // level 0: priority 0 (normal), level 1: priority -1 (high)
constexpr c10::StreamId kPoolIds = kPoolSize * kPriorities; // ids 1 .. kPoolIds
constexpr int kDedicated = 64; // dedicated streams per device: ids kPoolIds + 1 .. kPoolIds + kDedicated
constexpr c10::StreamId kExternalIds = kPoolIds + kDedicated; // external streams: ids after this
constexpr int kExternal = 64; // external streams per device

struct Pool {
  std::mutex mutex; // serialises stream creation and dedicated-stream bookkeeping
  std::array<std::atomic<fooStream_t>, kPoolIds> streams{};
  std::array<std::atomic<uint32_t>, kPriorities> next{};
  // Dedicated streams, created on first acquire and kept (PyTorch may still name them) for reuse.
  std::array<std::atomic<fooStream_t>, kDedicated> dedicated{};
  std::array<int, kDedicated> dedicated_priority{};
  std::array<bool, kDedicated> dedicated_in_use{};
  // Handles created outside PyTorch, each named by id kExternalIds + 1 + its slot.
  std::array<std::atomic<fooStream_t>, kExternal> external{};
};

std::array<Pool, kMaxDevices> pools;

std::atomic<int> sync_debug{0}; // a SyncDebugMode, for all threads as CUDA's

// The current stream id of this thread on each device (0, the default stream, until set).
thread_local std::array<c10::StreamId, kMaxDevices> current_ids{};

int level_of(int priority) {
  return priority < 0 ? 1 : 0;
}

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

void check_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "Expected a foo stream, not ", stream);
  check_device_index(stream.device_index());
  TORCH_CHECK(
      stream.id() >= 0 && stream.id() <= kExternalIds + kExternal,
      "Invalid foo stream id ",
      stream.id(),
      " (streams come from torch.foo.Stream(), torch.Stream(device=...), torch.foo.current_stream())");
}

} // namespace

fooStream_t native_stream(const c10::Stream& stream) {
  check_stream(stream);
  if (stream.id() == 0) {
    return nullptr;
  }
  Pool& pool = pools[stream.device_index()];
  if (stream.id() > kExternalIds) {
    const fooStream_t handle = pool.external[stream.id() - kExternalIds - 1].load(std::memory_order_acquire);
    TORCH_CHECK(handle != nullptr, "foo stream ", stream.id(), " names no external stream");
    return handle;
  }
  if (stream.id() > kPoolIds) {
    const fooStream_t handle = pool.dedicated[stream.id() - kPoolIds - 1].load(std::memory_order_acquire);
    TORCH_CHECK(handle != nullptr, "foo stream ", stream.id(), " was never created");
    return handle;
  }
  auto& slot = pool.streams[stream.id() - 1];
  fooStream_t handle = slot.load(std::memory_order_acquire);
  if (handle != nullptr) {
    return handle;
  }
  std::lock_guard<std::mutex> lock(pool.mutex);
  handle = slot.load(std::memory_order_relaxed);
  if (handle == nullptr) {
    const c10::DeviceGuard guard(stream.device());
    const int priority = (stream.id() - 1) / kPoolSize == 0 ? 0 : -1;
    FOO_CHECK(fooStreamCreateWithPriority(&handle, fooStreamNonBlocking, priority));
    slot.store(handle, std::memory_order_release);
  }
  return handle;
}

c10::Stream current_stream(c10::DeviceIndex device) {
  check_device_index(device);
  return make_stream(device, current_ids[device]);
}

c10::Stream current_stream_of_current_device() {
  const c10::DeviceIndex device = current_device();
  return make_stream(device, current_ids[device]);
}

fooStream_t current_stream() {
  return current_stream_on(current_device());
}

fooStream_t current_stream_on(c10::DeviceIndex device) {
  const c10::StreamId id = current_ids[device];
  return id == 0 ? nullptr : native_stream(make_stream(device, id));
}

c10::Stream default_stream(c10::DeviceIndex device) {
  check_device_index(device);
  return make_stream(device, 0);
}

c10::Stream stream_from_pool(c10::DeviceIndex device, int priority) {
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  const int level = level_of(priority);
  const uint32_t slot = pools[device].next[level].fetch_add(1, std::memory_order_relaxed) % kPoolSize;
  return make_stream(device, 1 + level * kPoolSize + static_cast<c10::StreamId>(slot));
}

c10::Stream acquire_dedicated_stream(c10::DeviceIndex device, int priority) {
  check_device_index(device);
  Pool& pool = pools[device];
  const int wanted = level_of(priority) == 0 ? 0 : -1;
  std::lock_guard<std::mutex> lock(pool.mutex);
  int free_slot = -1;
  for (int i = 0; i < kDedicated; ++i) {
    const bool created = pool.dedicated[i].load(std::memory_order_relaxed) != nullptr;
    if (!pool.dedicated_in_use[i] && (!created || pool.dedicated_priority[i] == wanted)) {
      free_slot = i;
      if (created) {
        break; // reuse a stream before creating one
      }
    }
  }
  TORCH_CHECK(
      free_slot >= 0,
      "foo: all ",
      kDedicated,
      " dedicated streams of device ",
      static_cast<int>(device),
      " are in use (each process group takes up to three)");
  if (pool.dedicated[free_slot].load(std::memory_order_relaxed) == nullptr) {
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    fooStream_t handle = nullptr;
    FOO_CHECK(fooStreamCreateWithPriority(&handle, fooStreamNonBlocking, wanted));
    pool.dedicated_priority[free_slot] = wanted;
    pool.dedicated[free_slot].store(handle, std::memory_order_release);
  }
  pool.dedicated_in_use[free_slot] = true;
  return make_stream(device, kPoolIds + 1 + free_slot);
}

void release_dedicated_stream(const c10::Stream& stream) {
  check_stream(stream);
  TORCH_CHECK(
      stream.id() > kPoolIds && stream.id() <= kExternalIds,
      "release_dedicated_stream: ",
      stream,
      " is not a dedicated stream");
  Pool& pool = pools[stream.device_index()];
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.dedicated_in_use[stream.id() - kPoolIds - 1] = false;
}

c10::Stream external_stream(fooStream_t handle, c10::DeviceIndex device) {
  check_device_index(device);
  if (handle == nullptr) {
    return make_stream(device, 0);
  }
  int owner = -1;
  const fooError_t error = fooStreamGetDevice(handle, &owner);
  TORCH_CHECK(
      error == fooSuccess,
      "get_stream_from_external: ",
      static_cast<void*>(handle),
      " is not a foo stream (",
      fooGetLastErrorMessage(),
      ")");
  TORCH_CHECK(
      owner == device,
      "get_stream_from_external: the stream belongs to device ",
      owner,
      ", not to device ",
      static_cast<int>(device));
  Pool& pool = pools[device];
  std::lock_guard<std::mutex> lock(pool.mutex);
  int slot = -1;
  for (int i = 0; i < kExternal; ++i) {
    const fooStream_t known = pool.external[i].load(std::memory_order_relaxed);
    if (known == handle) {
      return make_stream(device, kExternalIds + 1 + i);
    }
    int unused = 0;
    // A free slot, or one whose stream its owner has destroyed since.
    if (slot < 0 && (known == nullptr || fooStreamGetDevice(known, &unused) != fooSuccess)) {
      slot = i;
    }
  }
  TORCH_CHECK(
      slot >= 0,
      "get_stream_from_external: ",
      kExternal,
      " external streams of device ",
      static_cast<int>(device),
      " are alive already");
  pool.external[slot].store(handle, std::memory_order_release);
  return make_stream(device, kExternalIds + 1 + slot);
}

c10::Stream exchange_stream(const c10::Stream& stream) {
  check_stream(stream);
  const c10::DeviceIndex device = stream.device_index();
  const c10::StreamId previous = current_ids[device];
  current_ids[device] = stream.id();
  return make_stream(device, previous);
}

int stream_priority(const c10::Stream& stream) {
  check_stream(stream);
  if (stream.id() > kExternalIds) {
    int priority = 0;
    const c10::DeviceGuard guard(stream.device());
    FOO_CHECK(fooStreamGetPriority(native_stream(stream), &priority));
    return priority;
  }
  if (stream.id() > kPoolIds) {
    Pool& pool = pools[stream.device_index()];
    std::lock_guard<std::mutex> lock(pool.mutex);
    return pool.dedicated_priority[stream.id() - kPoolIds - 1];
  }
  return stream.id() == 0 || (stream.id() - 1) / kPoolSize == 0 ? 0 : -1;
}

void set_sync_debug_mode(SyncDebugMode mode) {
  sync_debug.store(static_cast<int>(mode), std::memory_order_relaxed);
}

SyncDebugMode sync_debug_mode() {
  return static_cast<SyncDebugMode>(sync_debug.load(std::memory_order_relaxed));
}

void note_synchronization() {
  const SyncDebugMode mode = sync_debug_mode();
  if (C10_LIKELY(mode == SyncDebugMode::Disabled)) {
    return;
  }
  TORCH_CHECK(mode != SyncDebugMode::Error, "called a synchronizing foo operation");
  TORCH_WARN("called a synchronizing foo operation");
}

std::atomic<bool> deferred_error_pending{false};

namespace {
// The first deferred failure not raised yet; a leaked singleton, so that a worker finishing during exit
// never meets a destroyed mutex.
struct DeferredError {
  std::mutex mutex;
  std::string message;
};
DeferredError& deferred_error() {
  static auto* error = new DeferredError();
  return *error;
}
} // namespace

void report_deferred_error(std::string message) {
  DeferredError& error = deferred_error();
  const std::lock_guard<std::mutex> lock(error.mutex);
  if (!deferred_error_pending.load(std::memory_order_relaxed)) {
    error.message = std::move(message);
    deferred_error_pending.store(true, std::memory_order_release);
  }
}

void raise_deferred_error_slow() {
  std::string message;
  {
    DeferredError& error = deferred_error();
    const std::lock_guard<std::mutex> lock(error.mutex);
    if (!deferred_error_pending.load(std::memory_order_relaxed)) {
      return; // another thread raised it
    }
    message = std::move(error.message);
    deferred_error_pending.store(false, std::memory_order_release);
  }
  TORCH_CHECK(false, "foo: work queued earlier on a stream failed: ", message);
}

} // namespace torch_foo

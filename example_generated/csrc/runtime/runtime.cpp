// Emulated foo devices: the implementation behind runtime.h.
//
// Each device is a slice of host memory with a capacity, a registry of live allocations and a
// flag saying whether it has been initialised. Pointers are checked against the registry on every
// copy, so integration code that mixes up host and device pointers fails with an error here
// instead of on hardware. The default stream runs work in order, on the calling thread.
//
// To port to hardware, replace this file with calls into your driver; runtime.h stays.
#include "runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace {

constexpr int kMaxDevices = 16;
constexpr size_t kAlignment = 64;
constexpr size_t kDefaultCapacity = size_t{8} << 30;

struct Config {
  int device_count = 2;
  size_t capacity = kDefaultCapacity;
};

// Parses "1024", "512M", "8G"; returns false on anything else.
bool parse_bytes(const char* text, size_t* out) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text) {
    return false;
  }
  unsigned shift = 0;
  switch (*end) {
    case '\0': break;
    case 'K':
    case 'k':
      shift = 10;
      ++end;
      break;
    case 'M':
    case 'm':
      shift = 20;
      ++end;
      break;
    case 'G':
    case 'g':
      shift = 30;
      ++end;
      break;
    default: return false;
  }
  if (*end == 'B' || *end == 'b') {
    ++end;
  }
  if (*end != '\0') {
    return false;
  }
  *out = static_cast<size_t>(value) << shift;
  return true;
}

const Config& config() {
  static const Config cfg = [] {
    Config c;
    if (const char* env = std::getenv("FOO_DEVICE_COUNT")) {
      char* end = nullptr;
      const long n = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && n >= 0 && n <= kMaxDevices) {
        c.device_count = static_cast<int>(n);
      }
    }
    if (const char* env = std::getenv("FOO_DEVICE_MEMORY")) {
      size_t bytes = 0;
      if (parse_bytes(env, &bytes) && bytes > 0) {
        c.capacity = bytes;
      }
    }
    return c;
  }();
  return cfg;
}

struct Allocation {
  size_t size;
  int device;
};

struct DeviceState {
  std::atomic<bool> initialized{false};
  size_t used = 0; // guarded by registry_mutex
};

std::mutex registry_mutex;
std::map<uintptr_t, Allocation> registry; // base address -> allocation
DeviceState devices[kMaxDevices];

thread_local int current_device = 0;

bool valid_device(int device) {
  return device >= 0 && device < config().device_count;
}

// Finds the allocation containing [ptr, ptr + count). Caller holds registry_mutex.
const Allocation* find_locked(const void* ptr, size_t count, uintptr_t* base) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  auto it = registry.upper_bound(addr);
  if (it == registry.begin()) {
    return nullptr;
  }
  --it;
  if (addr + count > it->first + it->second.size || (count == 0 && addr >= it->first + it->second.size)) {
    return nullptr;
  }
  if (base != nullptr) {
    *base = it->first;
  }
  return &it->second;
}

bool is_device_range(const void* ptr, size_t count) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return find_locked(ptr, count, nullptr) != nullptr;
}

bool overlaps_device_memory(const void* ptr, size_t count) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry.upper_bound(addr + (count == 0 ? 0 : count - 1));
  if (it == registry.begin()) {
    return false;
  }
  --it;
  return addr < it->first + it->second.size;
}

void mark_initialized(int device) {
  devices[device].initialized.store(true, std::memory_order_relaxed);
}

fooError_t check_stream(fooStream_t stream) {
  // Only the default stream exists so far; it executes work in order on the calling thread.
  return stream == nullptr ? fooSuccess : fooErrorInvalidResourceHandle;
}

fooError_t check_copy(void* dst, const void* src, size_t count, fooMemcpyKind kind) {
  if ((dst == nullptr || src == nullptr) && count > 0) {
    return fooErrorInvalidValue;
  }
  if (count == 0) {
    return fooSuccess;
  }
  const bool dst_device = kind == fooMemcpyHostToDevice || kind == fooMemcpyDeviceToDevice;
  const bool src_device = kind == fooMemcpyDeviceToHost || kind == fooMemcpyDeviceToDevice;
  if (kind < fooMemcpyHostToHost || kind > fooMemcpyDeviceToDevice) {
    return fooErrorInvalidValue;
  }
  if (dst_device ? !is_device_range(dst, count) : overlaps_device_memory(dst, count)) {
    return fooErrorInvalidDevicePointer;
  }
  if (src_device ? !is_device_range(src, count) : overlaps_device_memory(src, count)) {
    return fooErrorInvalidDevicePointer;
  }
  return fooSuccess;
}

} // namespace

extern "C" {

const char* fooGetErrorString(fooError_t error) {
  switch (error) {
    case fooSuccess: return "no error";
    case fooErrorInvalidValue: return "invalid argument";
    case fooErrorInvalidDevice: return "invalid device ordinal";
    case fooErrorMemoryAllocation: return "out of memory";
    case fooErrorInvalidDevicePointer: return "invalid device pointer";
    case fooErrorInvalidResourceHandle: return "invalid resource handle";
    case fooErrorNotReady: return "device not ready";
    case fooErrorNoDevice: return "no foo device is available";
  }
  return "unknown error";
}

fooError_t fooGetDeviceCount(int* count) {
  if (count == nullptr) {
    return fooErrorInvalidValue;
  }
  *count = config().device_count;
  return fooSuccess;
}

fooError_t fooGetDevice(int* device) {
  if (device == nullptr) {
    return fooErrorInvalidValue;
  }
  if (config().device_count == 0) {
    return fooErrorNoDevice;
  }
  *device = current_device;
  return fooSuccess;
}

fooError_t fooSetDevice(int device) {
  if (!valid_device(device)) {
    return config().device_count == 0 ? fooErrorNoDevice : fooErrorInvalidDevice;
  }
  current_device = device;
  return fooSuccess;
}

fooError_t fooGetDeviceProperties(fooDeviceProp* prop, int device) {
  if (prop == nullptr) {
    return fooErrorInvalidValue;
  }
  if (!valid_device(device)) {
    return fooErrorInvalidDevice;
  }
  std::memset(prop, 0, sizeof(*prop));
  const std::string name = "Emulated foo device " + std::to_string(device);
  std::strncpy(prop->name, name.c_str(), sizeof(prop->name) - 1);
  prop->totalGlobalMem = config().capacity;
  prop->multiProcessorCount = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  prop->major = 1;
  prop->minor = 0;
  return fooSuccess;
}

fooError_t fooDeviceIsInitialized(int device, int* initialized) {
  if (initialized == nullptr) {
    return fooErrorInvalidValue;
  }
  if (!valid_device(device)) {
    return fooErrorInvalidDevice;
  }
  *initialized = devices[device].initialized.load(std::memory_order_relaxed) ? 1 : 0;
  return fooSuccess;
}

fooError_t fooDeviceSynchronize(void) {
  if (!valid_device(current_device)) {
    return fooErrorNoDevice;
  }
  return fooSuccess; // the default stream completes work before returning
}

fooError_t fooMalloc(void** devPtr, size_t size) {
  if (devPtr == nullptr) {
    return fooErrorInvalidValue;
  }
  const int device = current_device;
  if (!valid_device(device)) {
    return fooErrorNoDevice;
  }
  mark_initialized(device);
  *devPtr = nullptr;
  if (size == 0) {
    return fooSuccess;
  }
  const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    if (rounded > config().capacity - devices[device].used) {
      return fooErrorMemoryAllocation;
    }
    devices[device].used += rounded;
  }
  void* ptr = nullptr;
  if (posix_memalign(&ptr, kAlignment, rounded) != 0) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    devices[device].used -= rounded;
    return fooErrorMemoryAllocation;
  }
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry.emplace(reinterpret_cast<uintptr_t>(ptr), Allocation{rounded, device});
  *devPtr = ptr;
  return fooSuccess;
}

fooError_t fooFree(void* devPtr) {
  if (devPtr == nullptr) {
    return fooSuccess;
  }
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto it = registry.find(reinterpret_cast<uintptr_t>(devPtr));
    if (it == registry.end()) {
      return fooErrorInvalidDevicePointer;
    }
    devices[it->second.device].used -= it->second.size;
    registry.erase(it);
  }
  std::free(devPtr);
  return fooSuccess;
}

fooError_t fooMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) {
    return fooErrorInvalidValue;
  }
  const int device = current_device;
  if (!valid_device(device)) {
    return fooErrorNoDevice;
  }
  std::lock_guard<std::mutex> lock(registry_mutex);
  *total = config().capacity;
  *free = config().capacity - devices[device].used;
  return fooSuccess;
}

fooError_t fooPointerGetAttributes(fooPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) {
    return fooErrorInvalidValue;
  }
  std::lock_guard<std::mutex> lock(registry_mutex);
  uintptr_t base = 0;
  if (const Allocation* a = find_locked(ptr, 0, &base)) {
    attributes->device = a->device;
    attributes->base = reinterpret_cast<void*>(base);
    attributes->size = a->size;
  } else {
    attributes->device = -1;
    attributes->base = nullptr;
    attributes->size = 0;
  }
  return fooSuccess;
}

fooError_t fooMemcpy(void* dst, const void* src, size_t count, fooMemcpyKind kind) {
  if (const auto err = check_copy(dst, src, count, kind); err != fooSuccess) {
    return err;
  }
  if (count > 0) {
    std::memcpy(dst, src, count);
  }
  return fooSuccess;
}

fooError_t fooMemcpyAsync(void* dst, const void* src, size_t n, fooMemcpyKind kind, fooStream_t s) {
  if (const auto err = check_stream(s); err != fooSuccess) {
    return err;
  }
  if (const auto err = check_copy(dst, src, n, kind); err != fooSuccess) {
    return err;
  }
  if (n > 0) {
    std::memcpy(dst, src, n); // the default stream runs work in order, right away
  }
  return fooSuccess;
}

fooError_t fooMemsetAsync(void* devPtr, int value, size_t count, fooStream_t stream) {
  if (const auto err = check_stream(stream); err != fooSuccess) {
    return err;
  }
  if (count == 0) {
    return fooSuccess;
  }
  if (devPtr == nullptr || !is_device_range(devPtr, count)) {
    return fooErrorInvalidDevicePointer;
  }
  std::memset(devPtr, value, count);
  return fooSuccess;
}

fooError_t fooLaunchKernel(fooKernel_t kernel, void* args, fooStream_t stream) {
  if (kernel == nullptr) {
    return fooErrorInvalidValue;
  }
  if (const auto err = check_stream(stream); err != fooSuccess) {
    return err;
  }
  if (!valid_device(current_device)) {
    return fooErrorNoDevice;
  }
  mark_initialized(current_device);
  kernel(args);
  return fooSuccess;
}

fooError_t fooStreamSynchronize(fooStream_t stream) {
  return check_stream(stream);
}

} // extern "C"

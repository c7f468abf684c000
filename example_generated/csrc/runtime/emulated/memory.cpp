// Device memory, pinned host memory and copies on the emulated foo device.
//
// Address space. All devices live in one reserved range of the address space, a fixed-size region
// per device, handed out by a first-fit allocator at page granularity; pages become accessible when
// allocated and are given back to the OS when freed. Pointers are checked against the live
// allocations on every copy, so integration code that mixes up host and device pointers fails with
// an error here instead of on hardware.
//
// Strict memory mode (FOO_STRICT_MEMORY=1). Device memory then has two addresses: the one handed
// out (what PyTorch stores in tensors) lies in a range that is never accessible, and the runtime
// reaches the same pages through a second, private range at a fixed offset. Host code that
// dereferences a device pointer crashes at once, with a message naming the device, as it would on
// hardware, where device memory is not in the host's address space at all. Copies translate the
// addresses; kernels translate theirs through their context's address() (emulation.h). Nothing is
// ever unprotected for the duration of a call, so host threads stay locked out while kernels run on
// the stream workers. Without strict mode the two ranges are one, so host code can read device
// memory (handy when debugging) and the translation is the identity.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "../internal.h"
#include "emulated.h"

namespace torch_foo::emulated {
namespace {

constexpr size_t kRegionAlignment = size_t{2} << 20; // device regions start on huge-page boundaries

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// ---- the address space of device memory ---------------------------------------------------------

struct Arena {
  char* user = nullptr; // device addresses handed out
  char* runtime = nullptr; // where the runtime reaches them (== user unless strict)
  size_t span = 0; // bytes reserved per device
  size_t size = 0; // span * device count

  bool contains(const void* p) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    const auto base = reinterpret_cast<uintptr_t>(user);
    return a >= base && a - base < size;
  }
  bool runtime_contains(const void* p) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    const auto base = reinterpret_cast<uintptr_t>(runtime);
    return a >= base && a - base < size;
  }
  // True if [p, p + count) overlaps the device range.
  bool overlaps(const void* p, size_t count) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    const auto base = reinterpret_cast<uintptr_t>(user);
    return count > 0 && a < base + size && a + count > base;
  }
  int device_of(const void* p) const {
    return static_cast<int>((static_cast<const char*>(p) - user) / span);
  }
  size_t offset_of(const void* p) const {
    return static_cast<size_t>(static_cast<const char*>(p) - user) % span;
  }
  char* to_runtime(const void* p) const {
    return runtime + (static_cast<const char*>(p) - user);
  }
};

Arena arena; // written once by initialize_memory(), before arena_ready is set
std::atomic<bool> arena_ready{false};

bool is_device_address(const void* p) {
  return arena_ready.load(std::memory_order_acquire) && arena.contains(p);
}

// Reserves `size` bytes of address space, inaccessible until parts are made accessible.
char* reserve(size_t size) {
  void* p = mmap(nullptr, size + kRegionAlignment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return nullptr;
  }
  // A forked child cannot use the runtime anyway; not copying the mappings keeps fork() fast
  // (DataLoader workers) however much device memory is in use.
  madvise(p, size + kRegionAlignment, MADV_DONTFORK);
  return reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(p), kRegionAlignment));
}

// ---- strict mode's crash explainer --------------------------------------------------------------

// Writes `value` in hex into `out`; returns the number of characters. Async-signal-safe.
size_t format_hex(uintptr_t value, char* out) {
  char digits[2 * sizeof(value)];
  size_t n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value != 0);
  for (size_t i = 0; i < n; ++i) {
    out[i] = digits[n - 1 - i];
  }
  return n;
}

struct sigaction previous_segv_action;

// Explains a crash caused by touching device memory, then lets the previous handler (Python's
// faulthandler, say) or the default action report it.
void on_segv(int /*signal*/, siginfo_t* info, void* /*context*/) {
  const void* address = info->si_addr;
  const char* what = nullptr;
  if (arena.contains(address)) {
    what = worker_stream() != nullptr ? "a kernel used a device pointer without translating it (ctx->address)"
                                      : "host code read or wrote device memory directly";
  } else if (arena.runtime_contains(address)) {
    what = "a kernel or copy used device memory that is not allocated (freed too early?)";
  }
  if (what != nullptr) {
    char message[512];
    size_t n = 0;
    const auto append = [&](const char* text) {
      for (; *text != '\0' && n < sizeof(message) - 24; ++text) {
        message[n++] = *text;
      }
    };
    append("\nfoo strict memory mode: ");
    append(what);
    append(" at address 0x");
    n += format_hex(reinterpret_cast<uintptr_t>(address), message + n);
    if (arena.contains(address)) {
      append(" (device ");
      const int device = arena.device_of(address);
      if (device >= 10) {
        message[n++] = static_cast<char>('0' + device / 10);
      }
      message[n++] = static_cast<char>('0' + device % 10);
      message[n++] = ')';
    }
    append(
        ". Device memory is reachable only through the runtime: copy it to the host first "
        "(tensor.cpu()), or run the access in a kernel.\n");
    (void)!write(STDERR_FILENO, message, n);
  }
  sigaction(SIGSEGV, &previous_segv_action, nullptr); // the faulting access repeats and is reported
}

// ---- device allocations -------------------------------------------------------------------------

struct DeviceMemory {
  std::mutex mutex; // guards everything below
  bool ready = false;
  std::map<size_t, size_t> free_ranges; // offset -> length, neighbours always merged
  std::map<size_t, size_t> allocations; // offset -> length of live allocations
  size_t used = 0;
};

// Never destroyed, like the pinned table below: other threads may still allocate, free and copy
// while C++ static destructors run at process exit.
DeviceMemory* const memories = new DeviceMemory[FOO_MAX_DEVICES];

// Caller holds d.mutex.
void prepare(DeviceMemory& d) {
  if (!d.ready) {
    d.free_ranges.emplace(0, arena.span);
    d.ready = true;
  }
}

// Returns [offset, offset + length) to the free ranges of `d`. Caller holds its mutex.
void insert_free_range(DeviceMemory& d, size_t offset, size_t length) {
  auto next = d.free_ranges.lower_bound(offset);
  if (next != d.free_ranges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      length += prev->second;
      d.free_ranges.erase(prev);
    }
  }
  if (next != d.free_ranges.end() && offset + length == next->first) {
    length += next->second;
    d.free_ranges.erase(next);
  }
  d.free_ranges.emplace(offset, length);
}

// The live allocation of `d` that contains [offset, offset + count); caller holds its mutex.
const std::pair<const size_t, size_t>* find_allocation(const DeviceMemory& d, size_t offset, size_t count) {
  auto it = d.allocations.upper_bound(offset);
  if (it == d.allocations.begin()) {
    return nullptr;
  }
  --it;
  const size_t end = it->first + it->second;
  if (offset >= end || count > end - offset) {
    return nullptr;
  }
  return &*it;
}

// ---- pinned host memory -------------------------------------------------------------------------

std::mutex host_mutex;
std::map<uintptr_t, size_t>& pinned = *new std::map<uintptr_t, size_t>(); // base -> length, never destroyed

// The pinned allocation containing [ptr, ptr + count), as (base, length), or (0, 0).
std::pair<uintptr_t, size_t> find_pinned(const void* ptr, size_t count) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(host_mutex);
  auto it = pinned.upper_bound(addr);
  if (it == pinned.begin()) {
    return {0, 0};
  }
  --it;
  if (addr - it->first >= it->second || count > it->second - (addr - it->first)) {
    return {0, 0};
  }
  return *it;
}

fooPointerAttributes attributes_of(fooMemoryType type, int device, void* base, size_t size) {
  fooPointerAttributes attributes;
  attributes.type = type;
  attributes.device = device;
  attributes.base = base;
  attributes.size = size;
  return attributes;
}

// ---- copies -------------------------------------------------------------------------------------

// Checks both sides of a copy against `kind` and translates device addresses to the runtime's view;
// every copy (memcpy, memcpy_async) passes here, so this is where fault injection fails copies.
fooError_t resolve_copy(void** dst, const void** src, size_t count, fooMemcpyKind kind) {
  const bool dst_device = kind == fooMemcpyHostToDevice || kind == fooMemcpyDeviceToDevice;
  const bool src_device = kind == fooMemcpyDeviceToHost || kind == fooMemcpyDeviceToDevice;
  if (dst_device ? !is_device_range(*dst, count) : overlaps_device_memory(*dst, count)) {
    return runtime::fail(
        fooErrorInvalidDevicePointer,
        dst_device ? "copy destination %p is not inside one live device allocation of %zu bytes or more"
                   : "copy destination %p is device memory, but the copy's kind says host memory",
        *dst,
        count);
  }
  if (src_device ? !is_device_range(*src, count) : overlaps_device_memory(*src, count)) {
    return runtime::fail(
        fooErrorInvalidDevicePointer,
        src_device ? "copy source %p is not inside one live device allocation of %zu bytes or more"
                   : "copy source %p is device memory, but the copy's kind says host memory",
        *src,
        count);
  }
  if (dst_device) {
    *dst = arena.to_runtime(*dst);
  }
  if (src_device) {
    *src = arena.to_runtime(*src);
  }
  return inject(Fault::Memcpy, fooErrorUnknown); // fault injection
}

// The device a copy works on (-1: host to host), for tracing and the memory utilisation (activity_hook).
int copy_device(const void* dst, const void* src, fooMemcpyKind kind) {
  const void* device_side = kind == fooMemcpyDeviceToHost ? src : dst;
  return kind != fooMemcpyHostToHost && is_device_address(device_side) ? arena.device_of(device_side) : -1;
}

// An asynchronous copy. Large ones are split across the worker's OpenMP threads, so that a copy on a
// stream moves data as fast as a blocking one (a device's copy engines reach full bandwidth
// without the host's help).
void copy_bytes(void* dst, const void* src, size_t count) {
#ifdef _OPENMP
  constexpr size_t kChunk = size_t{1} << 20;
  if (count >= 4 * kChunk) {
    const auto chunks = static_cast<int64_t>((count + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < chunks; ++i) {
      const size_t begin = static_cast<size_t>(i) * kChunk;
      std::memcpy(
          static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, std::min(kChunk, count - begin));
    }
    return;
  }
#endif
  std::memcpy(dst, src, count);
}

} // namespace

bool is_device_range(const void* ptr, size_t count) {
  if (!is_device_address(ptr)) {
    return false;
  }
  DeviceMemory& d = memories[arena.device_of(ptr)];
  std::lock_guard<std::mutex> lock(d.mutex);
  return find_allocation(d, arena.offset_of(ptr), std::max<size_t>(count, 1)) != nullptr;
}

bool overlaps_device_memory(const void* ptr, size_t count) {
  return arena_ready.load(std::memory_order_acquire) && arena.overlaps(ptr, count);
}

void* runtime_address(const void* ptr) {
  if (is_device_address(ptr)) {
    return arena.to_runtime(ptr);
  }
  return const_cast<void*>(ptr);
}

bool is_pinned(const void* ptr, size_t count) {
  return find_pinned(ptr, count).second != 0;
}

void initialize_memory() {
  const Config& c = config();
  arena.span = round_up(std::max<size_t>(c.capacity, 1), kRegionAlignment);
  arena.size = arena.span * static_cast<size_t>(c.device_count);
  if (arena.size > 0) {
    arena.user = reserve(arena.size);
    arena.runtime = c.strict ? reserve(arena.size) : arena.user;
    if (arena.user == nullptr || arena.runtime == nullptr) {
      arena.size = 0; // no address space: every allocation fails with fooErrorMemoryAllocation
    }
  }
  if (c.strict && arena.size > 0) {
    struct sigaction action = {};
    action.sa_sigaction = &on_segv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_segv_action);
  }
  arena_ready.store(true, std::memory_order_release);
}

} // namespace torch_foo::emulated

namespace torch_foo::driver {

using namespace emulated;

fooError_t malloc(int device, size_t size, void** ptr) {
  // fault injection
  if (const auto fault = inject(Fault::Malloc, fooErrorMemoryAllocation); fault != fooSuccess) {
    return fault;
  }
  const size_t capacity = config().capacity;
  if (size > capacity || arena.size == 0) {
    return runtime::fail(fooErrorMemoryAllocation, "%zu bytes exceed device %d's %zu", size, device, capacity);
  }
  const size_t length = round_up(size, page_size());
  DeviceMemory& d = memories[device];
  size_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    prepare(d);
    auto it = length > capacity - d.used
        ? d.free_ranges.end()
        : std::find_if(d.free_ranges.begin(), d.free_ranges.end(), [&](const auto& r) { return r.second >= length; });
    if (it == d.free_ranges.end()) {
      return runtime::fail(
          fooErrorMemoryAllocation,
          "cannot allocate %zu bytes on device %d: %zu of %zu bytes are in use",
          size,
          device,
          d.used,
          capacity);
    }
    offset = it->first;
    const size_t rest = it->second - length;
    d.free_ranges.erase(it);
    if (rest > 0) {
      d.free_ranges.emplace(offset + length, rest);
    }
    d.allocations.emplace(offset, length);
    d.used += length;
  }
  const size_t start = static_cast<size_t>(device) * arena.span + offset;
  if (mprotect(arena.runtime + start, length, PROT_READ | PROT_WRITE) != 0) {
    std::lock_guard<std::mutex> lock(d.mutex);
    d.allocations.erase(offset);
    insert_free_range(d, offset, length);
    d.used -= length;
    return runtime::fail(fooErrorMemoryAllocation, "the host refused %zu bytes for device %d", size, device);
  }
  *ptr = arena.user + start;
  return fooSuccess;
}

fooError_t free(void* ptr) {
  if (!is_device_address(ptr)) {
    return runtime::fail(fooErrorInvalidDevicePointer, "%p is not device memory", ptr);
  }
  if (worker_stream() != nullptr) {
    return runtime::fail(fooErrorNotPermitted, "device memory cannot be freed by work running on a stream");
  }
  const int device = arena.device_of(ptr);
  const size_t offset = arena.offset_of(ptr);
  DeviceMemory& d = memories[device];
  size_t length = 0;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    auto it = d.allocations.find(offset);
    if (it == d.allocations.end()) {
      return runtime::fail(
          fooErrorInvalidDevicePointer, "%p is not the start of a live allocation on device %d", ptr, device);
    }
    length = it->second;
    d.allocations.erase(it);
  }
  wait_all_devices(); // queued work may still use the memory
  char* pages = arena.runtime + static_cast<size_t>(device) * arena.span + offset;
  madvise(pages, length, MADV_DONTNEED); // the pages go back to the OS
  mprotect(pages, length, PROT_NONE);
  std::lock_guard<std::mutex> lock(d.mutex);
  insert_free_range(d, offset, length);
  d.used -= length;
  return fooSuccess;
}

fooError_t mem_get_info(int device, size_t* free, size_t* total) {
  DeviceMemory& d = memories[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  *total = config().capacity;
  *free = config().capacity - d.used;
  return fooSuccess;
}

void pointer_attributes(const void* ptr, fooPointerAttributes* attributes) {
  *attributes = attributes_of(fooMemoryTypeUnregistered, -1, nullptr, 0);
  if (is_device_address(ptr)) {
    const int device = arena.device_of(ptr);
    DeviceMemory& d = memories[device];
    std::lock_guard<std::mutex> lock(d.mutex);
    if (const auto* a = find_allocation(d, arena.offset_of(ptr), 1)) {
      *attributes = attributes_of(
          fooMemoryTypeDevice, device, arena.user + static_cast<size_t>(device) * arena.span + a->first, a->second);
    }
    return;
  }
  const auto [base, length] = find_pinned(ptr, 1);
  if (length > 0) {
    *attributes = attributes_of(fooMemoryTypeHost, -1, reinterpret_cast<void*>(base), length);
  }
}

fooError_t malloc_host(size_t size, void** ptr) {
  // Page-locking is emulated by populating the pages up front, so copies never fault on them.
  // (mlock would pin them for real, but its limit is often a few MiB.)
  const size_t length = round_up(size, page_size());
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    return runtime::fail(fooErrorMemoryAllocation, "the host refused %zu bytes of pinned memory", size);
  }
  std::lock_guard<std::mutex> lock(host_mutex);
  pinned.emplace(reinterpret_cast<uintptr_t>(p), length);
  *ptr = p;
  return fooSuccess;
}

fooError_t free_host(void* ptr) {
  if (worker_stream() != nullptr) {
    return runtime::fail(fooErrorNotPermitted, "pinned memory cannot be freed by work running on a stream");
  }
  size_t length = 0;
  {
    std::lock_guard<std::mutex> lock(host_mutex);
    auto it = pinned.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == pinned.end()) {
      return runtime::fail(fooErrorInvalidValue, "%p is not pinned memory from fooMallocHost", ptr);
    }
    length = it->second;
    pinned.erase(it);
  }
  wait_all_devices(); // an asynchronous copy may still use it
  munmap(ptr, length);
  return fooSuccess;
}

fooError_t memcpy(void* dst, const void* src, size_t count, fooMemcpyKind kind) {
  const int device = copy_device(dst, src, kind); // [tracing] and the memory utilisation
  if (const auto err = resolve_copy(&dst, &src, count, kind); err != fooSuccess) {
    return err;
  }
  const uint64_t start = tracing::any_enabled() ? timestamp() : 0; // [tracing]
  const auto hook = device >= 0 ? activity_hook : nullptr;
  if (__builtin_expect(hook != nullptr, 0)) {
    hook(device, Activity::Memory, true);
  }
  std::memcpy(dst, src, count);
  if (__builtin_expect(hook != nullptr, 0)) {
    hook(device, Activity::Memory, false);
  }
  if (start != 0) { // [tracing] the copy ran on this thread, on no stream
    tracing::record_host_copy(kind, device, 0, count, start);
  }
  return fooSuccess;
}

fooError_t memcpy_async(void* dst, const void* src, size_t count, fooMemcpyKind kind, fooStream_t handle) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown stream %p", static_cast<void*>(handle));
  }
  const bool host_dst = kind == fooMemcpyHostToHost || kind == fooMemcpyDeviceToHost;
  const bool host_src = kind == fooMemcpyHostToHost || kind == fooMemcpyHostToDevice;
  // Pageable host memory may be freed or reused as soon as this returns, so the copy happens now,
  // in stream order; pinned memory belongs to the caller until the stream has passed the copy.
  const bool pageable = (host_dst && !is_pinned(dst, count)) || (host_src && !is_pinned(src, count));
  if (const auto err = capture_check(s); err != fooSuccess) {
    return err;
  }
  if (pageable) { // a graph cannot hold on to pageable memory, and the copy would wait for the stream
    const char* call = "an asynchronous copy of pageable host memory (use pinned memory)";
    if (const auto conflict = stream_capture_conflict(s, call); conflict != fooSuccess) {
      return conflict;
    }
  }
  if (const auto err = resolve_copy(&dst, &src, count, kind); err != fooSuccess) {
    return err;
  }
  if (pageable) {
    if (s == worker_stream()) {
      return runtime::fail(fooErrorNotPermitted, "a stream's own work cannot wait for that stream");
    }
    {
      const StreamWaitTrace trace(fooSynchronizationStream, s); // [tracing]
      wait_for(s, stream_tail(s));
    }
    const uint64_t start = tracing::any_enabled() ? timestamp() : 0; // [tracing]
    std::memcpy(dst, src, count);
    if (start != 0) { // [tracing] the copy ran on this thread, in the stream's order
      tracing::record_host_copy(
          kind, stream_device_of(s), stream_trace_id_of(s), count, start, stream_trace_flags_of(s));
    }
    return fooSuccess;
  }
  Task task;
  task.kind = Task::Kind::Copy;
  task.dst = dst;
  task.src = src;
  task.count = count;
  enqueue(s, std::move(task), trace_tag(s, fooActivityKindMemcpy, tracing::copy_name(kind), kind));
  return fooSuccess;
}

fooError_t memset_async(void* ptr, int value, size_t count, fooStream_t handle) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown stream %p", static_cast<void*>(handle));
  }
  if (const auto err = capture_check(s); err != fooSuccess) {
    return err;
  }
  if (!is_device_range(ptr, count)) {
    return runtime::fail(
        fooErrorInvalidDevicePointer, "%p is not in a live allocation of %zu bytes or more", ptr, count);
  }
  Task task;
  task.kind = Task::Kind::Fill;
  task.dst = arena.to_runtime(ptr);
  task.value = value;
  task.count = count;
  enqueue(s, std::move(task), trace_tag(s, fooActivityKindMemset, "Memset"));
  return fooSuccess;
}

} // namespace torch_foo::driver

namespace torch_foo::emulated {

// Runs a copy or fill task on a stream worker.
void run_transfer(const Task& task) {
  if (task.kind == Task::Kind::Copy) {
    copy_bytes(task.dst, task.src, task.count);
  } else {
    std::memset(task.dst, task.value, task.count);
  }
}

} // namespace torch_foo::emulated

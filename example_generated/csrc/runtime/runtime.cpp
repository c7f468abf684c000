// Emulated foo devices: the implementation behind runtime.h.
//
// Memory. All devices live in one reserved range of the address space, a fixed-size region per
// device, handed out by a first-fit allocator at page granularity; pages become accessible when
// allocated and are given back to the OS when freed. Pointers are checked against the live
// allocations on every copy, so integration code that mixes up host and device pointers fails
// with an error here instead of on hardware.
//
// Strict memory mode (FOO_STRICT_MEMORY=1). Device memory then has two addresses: the one
// handed out (what PyTorch stores in tensors) lies in a range that is never accessible, and the
// runtime reaches the same pages through a second, private range at a fixed offset. Host code that
// dereferences a device pointer crashes at once, with a message naming the device, as it would on
// hardware, where device memory is not in the host's address space at all. Copies translate the
// addresses; kernels translate theirs with fooKernelAddress (an addition, no more). Nothing is
// ever unprotected for the duration of a call, so host threads stay locked out while kernels run
// on the stream workers. Without strict mode the two ranges are one, so host code can read device
// memory (handy when debugging) and the translation is the identity.
//
// Execution. Each stream has a worker thread that runs its tasks (kernels, copies, fills, event
// records, waits for other streams) in order from a bounded queue. A thread that waits (a worker
// with nothing to do, a host thread synchronising) spins briefly and then sleeps, so that a stream
// that is kept busy never pays for a sleep and wake-up while an idle one costs nothing. Positions
// in a stream are task counts: an event is a (stream, position) pair, complete once the stream has
// finished that many tasks.
//
// To port to hardware, replace this file with calls into your driver; runtime.h stays.
#include "runtime.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kMaxDevices = 16;
constexpr size_t kDefaultCapacity = size_t{8} << 30;
constexpr size_t kRegionAlignment = size_t{2} << 20; // device regions start on huge-page boundaries
constexpr uint64_t kQueueCapacity = 1024; // tasks a stream holds before launches wait, like a device's queue
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -1;
constexpr uint32_t kStreamMagic = 0x5354524d;
constexpr uint32_t kEventMagic = 0x45564e54;
// How long a waiting thread spins before it sleeps: a stream worker after its last task, a host
// thread in a synchronising call.
constexpr std::chrono::microseconds kWorkerSpin{100};
constexpr std::chrono::microseconds kHostSpin{20};

// ---- configuration ----------------------------------------------------------------------------

struct Config {
  int device_count = 2;
  size_t capacity = kDefaultCapacity;
  bool strict = false;
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
  if (*end != '\0' || value > (~0ull >> shift)) {
    return false;
  }
  *out = static_cast<size_t>(value) << shift;
  return true;
}

const Config& config() {
  static const Config cfg = [] {
    Config c;
    // A value that does not parse keeps the default, with a warning on stderr: configuration is read
    // before any caller could receive an error, and a typo must not go unnoticed.
    if (const char* env = std::getenv("FOO_DEVICE_COUNT")) {
      char* end = nullptr;
      const long n = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && n >= 0 && n <= kMaxDevices) {
        c.device_count = static_cast<int>(n);
      } else {
        std::fprintf(
            stderr,
            "foo: ignoring FOO_DEVICE_COUNT=%s (expected 0 to %d); using %d devices\n",
            env,
            kMaxDevices,
            c.device_count);
      }
    }
    if (const char* env = std::getenv("FOO_DEVICE_MEMORY")) {
      size_t bytes = 0;
      if (parse_bytes(env, &bytes) && bytes > 0 && bytes <= (size_t{1} << 40)) {
        c.capacity = bytes;
      } else {
        std::fprintf(
            stderr,
            "foo: ignoring FOO_DEVICE_MEMORY=%s (expected a size such as 512M or 8G, "
            "at most 1T); using the default\n",
            env);
      }
    }
    if (const char* env = std::getenv("FOO_STRICT_MEMORY")) {
      c.strict = env[0] != '\0' && std::strcmp(env, "0") != 0;
    }
    return c;
  }();
  return cfg;
}

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

size_t round_up(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or until `budget` has passed; returns done().
template <typename Done>
bool spin_until(const Done& done, std::chrono::microseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int round = 0;; ++round) {
    for (int i = 0; i < 32; ++i) {
      if (done()) {
        return true;
      }
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return done();
    }
    if (round >= 2) {
      std::this_thread::yield(); // let a thread that has real work (an OpenMP team member) run
    }
  }
}

// ---- process state: initialisation and fork ----------------------------------------------------

std::atomic<bool> initialized{false}; // something (memory, a stream, an event) exists
std::atomic<bool> bad_fork{false}; // this process is a child forked after initialisation
std::once_flag init_once;

// Runs in the child after fork(). Worker threads do not survive a fork and the state they guard
// may be mid-update, so a child of an initialised process must not touch the runtime.
void on_fork_child() {
  if (initialized.load()) {
    bad_fork.store(true);
  }
}

const bool fork_handler_registered = [] { return pthread_atfork(nullptr, nullptr, &on_fork_child) == 0; }();

bool forked() {
  return bad_fork.load(std::memory_order_relaxed);
}

thread_local int current_device = 0;
struct Stream;
thread_local Stream* worker_stream = nullptr; // set on stream worker threads

bool valid_device(int device) {
  return device >= 0 && device < config().device_count;
}

// ---- the address space of device memory -------------------------------------------------------

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

Arena arena; // written once by init(), before arena_ready is set
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

// Strict memory mode: explains a crash caused by touching device memory, then lets the previous
// handler (Python's faulthandler, say) or the default action report it.
void on_segv(int /*signal*/, siginfo_t* info, void* /*context*/) {
  const void* address = info->si_addr;
  const char* what = nullptr;
  if (arena.contains(address)) {
    what = worker_stream != nullptr ? "a kernel used a device pointer without fooKernelAddress"
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

void drain_at_exit();

void init() {
  std::call_once(init_once, [] {
    initialized.store(true); // first, so that a fork from now on makes a bad child
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
    std::atexit(&drain_at_exit);
    arena_ready.store(true, std::memory_order_release);
  });
}

// ---- devices ----------------------------------------------------------------------------------

struct Device {
  std::mutex mutex; // guards everything below except the atomics
  bool memory_ready = false;
  std::map<size_t, size_t> free_ranges; // offset -> length, neighbours always merged
  std::map<size_t, size_t> allocations; // offset -> length of live allocations
  size_t used = 0;
  std::vector<Stream*> streams; // live streams
  std::atomic<Stream*> default_stream{nullptr};
  std::atomic<bool> initialized{false};
};

Device devices[kMaxDevices];

void mark_initialized(int device) {
  init();
  devices[device].initialized.store(true, std::memory_order_relaxed);
}

// Caller holds device.mutex.
void prepare_memory(Device& d) {
  if (!d.memory_ready) {
    d.free_ranges.emplace(0, arena.span);
    d.memory_ready = true;
  }
}

// Returns [offset, offset + length) to the free ranges of `device`. Caller holds its mutex.
void insert_free_range(Device& d, size_t offset, size_t length) {
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

// The live allocation of `device` that contains [offset, offset + count); caller holds its mutex.
const std::pair<const size_t, size_t>* find_allocation(const Device& d, size_t offset, size_t count) {
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

bool is_device_range(const void* ptr, size_t count) {
  if (!is_device_address(ptr)) {
    return false;
  }
  Device& d = devices[arena.device_of(ptr)];
  std::lock_guard<std::mutex> lock(d.mutex);
  return find_allocation(d, arena.offset_of(ptr), std::max<size_t>(count, 1)) != nullptr;
}

// ---- pinned host memory -----------------------------------------------------------------------

std::mutex host_mutex;
std::map<uintptr_t, size_t> pinned; // base -> length

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

// ---- streams ----------------------------------------------------------------------------------

struct Event;
void retain(Stream* s);
void release(Stream* s);
void retain(Event* e);
void release(Event* e);

struct Task {
  enum class Kind : uint8_t { Kernel, Copy, Fill, Record, Wait };
  Kind kind = Kind::Kernel;
  int value = 0; // Fill: the byte
  fooKernel_t kernel = nullptr;
  void* args = nullptr; // Kernel: its argument block; Copy, Fill: the destination
  const void* src = nullptr; // Copy: the source
  size_t count = 0; // Copy, Fill: bytes
  Event* event = nullptr; // Record: the timing event to stamp (holds a reference)
  Stream* other = nullptr; // Wait: the stream to wait for (holds a reference) ...
  uint64_t position = 0; // ... until it has finished this many tasks
};

struct Stream {
  uint32_t magic = kStreamMagic;
  int device = 0;
  int priority = 0;
  bool is_default = false;
  std::atomic<int> refs{1};
  std::mutex mutex;
  std::condition_variable work_ready; // the worker sleeps here when the queue is empty
  std::condition_variable work_done; // host threads sleep here when they wait for the stream
  std::vector<Task> queue = std::vector<Task>(kQueueCapacity); // a ring, guarded by mutex
  uint64_t head = 0; // tasks taken by the worker (guarded by mutex)
  std::atomic<uint64_t> tail{0}; // tasks enqueued (written under mutex)
  std::atomic<uint64_t> done{0}; // tasks finished
  bool worker_sleeping = false; // guarded by mutex
  bool stopping = false; // guarded by mutex: destroyed, the worker exits once the queue is empty
  std::atomic<int> waiters{0}; // threads sleeping on work_done
  std::atomic<int> error{0}; // a failure to report at the next synchronisation (0: none)
};

struct Event {
  uint32_t magic = kEventMagic;
  int device = 0;
  bool timing = true;
  std::atomic<int> refs{1};
  std::mutex mutex; // guards the fields below
  Stream* stream = nullptr; // where the event was last recorded (holds a reference); null if never
  uint64_t position = 0;
  int64_t time_ns = -1; // when the last record was reached (timing events)
};

void retain(Stream* s) {
  s->refs.fetch_add(1, std::memory_order_relaxed);
}

void release(Stream* s) {
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete s;
  }
}

void retain(Event* e) {
  e->refs.fetch_add(1, std::memory_order_relaxed);
}

void release(Event* e) {
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (e->stream != nullptr) {
      release(e->stream);
    }
    delete e;
  }
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Blocks the calling thread until `s` has finished `position` tasks.
void wait_for(Stream* s, uint64_t position) {
  const auto reached = [&] { return s->done.load() >= position; };
  if (spin_until(reached, kHostSpin)) {
    return;
  }
  std::unique_lock<std::mutex> lock(s->mutex);
  s->waiters.fetch_add(1);
  s->work_done.wait(lock, reached);
  s->waiters.fetch_sub(1);
}

// Appends a task; `on_position` runs with the task's position before the worker can see it.
template <typename OnPosition>
uint64_t enqueue(Stream* s, Task task, const OnPosition& on_position) {
  std::unique_lock<std::mutex> lock(s->mutex);
  if (s->tail.load(std::memory_order_relaxed) - s->head == kQueueCapacity) {
    s->waiters.fetch_add(1);
    s->work_done.wait(lock, [&] { return s->tail.load(std::memory_order_relaxed) - s->head < kQueueCapacity; });
    s->waiters.fetch_sub(1);
  }
  const uint64_t position = s->tail.load(std::memory_order_relaxed) + 1;
  s->queue[(position - 1) % kQueueCapacity] = task;
  on_position(position);
  s->tail.store(position, std::memory_order_release);
  const bool wake = s->worker_sleeping;
  lock.unlock();
  if (wake) {
    s->work_ready.notify_one();
  }
  return position;
}

uint64_t enqueue(Stream* s, Task task) {
  return enqueue(s, task, [](uint64_t) {});
}

// An asynchronous copy. Large ones are split across the worker's OpenMP threads, as Copy.cpp
// splits synchronous ones across the host's, so that a copy on a stream moves data as fast as a
// blocking one (a device's copy engines reach full bandwidth without the host's help).
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

void run(Stream* s, Task& task, uint64_t position) {
  switch (task.kind) {
    case Task::Kind::Kernel:
      if (task.kernel(task.args) != 0) {
        s->error.store(fooErrorLaunchFailure);
      }
      break;
    case Task::Kind::Copy: copy_bytes(task.args, task.src, task.count); break;
    case Task::Kind::Fill: std::memset(task.args, task.value, task.count); break;
    case Task::Kind::Record: {
      Event* e = task.event;
      {
        std::lock_guard<std::mutex> lock(e->mutex);
        if (e->stream == s && e->position == position) { // not recorded again elsewhere meanwhile
          e->time_ns = now_ns();
        }
      }
      release(e);
      break;
    }
    case Task::Kind::Wait:
      wait_for(task.other, task.position);
      release(task.other);
      break;
  }
}

void worker_main(Stream* s) {
  current_device = s->device;
  worker_stream = s;
  const std::string name = std::string("foo").substr(0, 8) + " dev" + std::to_string(s->device);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  for (;;) {
    Task task;
    uint64_t position = 0;
    {
      std::unique_lock<std::mutex> lock(s->mutex);
      if (s->head == s->tail.load(std::memory_order_relaxed)) {
        lock.unlock();
        const uint64_t taken = s->head; // only this thread changes head
        spin_until([&] { return s->tail.load(std::memory_order_acquire) != taken; }, kWorkerSpin);
        lock.lock();
        s->worker_sleeping = true;
        s->work_ready.wait(lock, [&] { return s->head != s->tail.load(std::memory_order_relaxed) || s->stopping; });
        s->worker_sleeping = false;
        if (s->head == s->tail.load(std::memory_order_relaxed)) {
          break; // stopping and drained
        }
      }
      task = s->queue[s->head % kQueueCapacity];
      position = ++s->head;
    }
    run(s, task, position);
    s->done.store(position);
    if (s->waiters.load() > 0) {
      std::lock_guard<std::mutex> lock(s->mutex);
      s->work_done.notify_all();
    }
  }
  {
    Device& d = devices[s->device];
    std::lock_guard<std::mutex> lock(d.mutex);
    d.streams.erase(std::find(d.streams.begin(), d.streams.end(), s));
  }
  release(s); // the worker's reference
}

// Creates a stream and its worker. Caller holds the device's mutex.
Stream* create_stream(int device, int priority, bool is_default) {
  auto* s = new Stream();
  s->device = device;
  s->priority = priority;
  s->is_default = is_default;
  retain(s); // one reference for the worker, one for the owner
  devices[device].streams.push_back(s);
  std::thread(&worker_main, s).detach();
  return s;
}

Stream* default_stream(int device) {
  Device& d = devices[device];
  Stream* s = d.default_stream.load(std::memory_order_acquire);
  if (s != nullptr) {
    return s;
  }
  mark_initialized(device);
  std::lock_guard<std::mutex> lock(d.mutex);
  s = d.default_stream.load(std::memory_order_relaxed);
  if (s == nullptr) {
    s = create_stream(device, kLeastPriority, true);
    d.default_stream.store(s, std::memory_order_release);
  }
  return s;
}

// Resolves a handle: NULL is the default stream of the current device.
fooError_t get_stream(fooStream_t handle, Stream** out) {
  if (handle == nullptr) {
    if (!valid_device(current_device)) {
      return fooErrorNoDevice;
    }
    *out = default_stream(current_device);
    return fooSuccess;
  }
  auto* s = reinterpret_cast<Stream*>(handle);
  if (s->magic != kStreamMagic) {
    return fooErrorInvalidResourceHandle;
  }
  *out = s;
  return fooSuccess;
}

fooError_t get_event(fooEvent_t handle, Event** out) {
  auto* e = reinterpret_cast<Event*>(handle);
  if (e == nullptr || e->magic != kEventMagic) {
    return fooErrorInvalidResourceHandle;
  }
  *out = e;
  return fooSuccess;
}

fooError_t take_error(Stream* s) {
  return static_cast<fooError_t>(s->error.exchange(fooSuccess));
}

// Waits for every stream of `device`; returns the first failure they report.
fooError_t synchronize_device(int device) {
  std::vector<Stream*> streams;
  {
    Device& d = devices[device];
    std::lock_guard<std::mutex> lock(d.mutex);
    streams = d.streams;
    for (Stream* s : streams) {
      retain(s);
    }
  }
  fooError_t result = fooSuccess;
  for (Stream* s : streams) {
    wait_for(s, s->tail.load(std::memory_order_acquire));
    const fooError_t error = take_error(s);
    if (result == fooSuccess) {
      result = error;
    }
    release(s);
  }
  return result;
}

// Waits for all work on all devices without consuming failures (they stay for their stream's
// next synchronisation).
void wait_all_devices() {
  for (int device = 0; device < config().device_count; ++device) {
    std::vector<Stream*> streams;
    {
      Device& d = devices[device];
      std::lock_guard<std::mutex> lock(d.mutex);
      streams = d.streams;
      for (Stream* s : streams) {
        retain(s);
      }
    }
    for (Stream* s : streams) {
      if (s != worker_stream) {
        wait_for(s, s->tail.load(std::memory_order_acquire));
      }
      release(s);
    }
  }
}

// Lets queued work finish before static destructors run (kernels call into libraries that are
// being torn down otherwise).
void drain_at_exit() {
  if (!forked() && worker_stream == nullptr) {
    wait_all_devices();
  }
}

fooPointerAttributes make_attributes(fooMemoryType type, int device, void* base, size_t size) {
  fooPointerAttributes attributes;
  attributes.type = type;
  attributes.device = device;
  attributes.base = base;
  attributes.size = size;
  return attributes;
}

// Validates a copy and translates device addresses to the runtime's view.
fooError_t resolve_copy(void** dst, const void** src, size_t count, fooMemcpyKind kind) {
  if (kind < fooMemcpyHostToHost || kind > fooMemcpyDeviceToDevice) {
    return fooErrorInvalidValue;
  }
  if (count == 0) {
    return fooSuccess;
  }
  if (*dst == nullptr || *src == nullptr) {
    return fooErrorInvalidValue;
  }
  const bool dst_device = kind == fooMemcpyHostToDevice || kind == fooMemcpyDeviceToDevice;
  const bool src_device = kind == fooMemcpyDeviceToHost || kind == fooMemcpyDeviceToDevice;
  const bool ready = arena_ready.load(std::memory_order_acquire);
  if (dst_device ? !is_device_range(*dst, count) : ready && arena.overlaps(*dst, count)) {
    return fooErrorInvalidDevicePointer;
  }
  if (src_device ? !is_device_range(*src, count) : ready && arena.overlaps(*src, count)) {
    return fooErrorInvalidDevicePointer;
  }
  if (dst_device) {
    *dst = arena.to_runtime(*dst);
  }
  if (src_device) {
    *src = arena.to_runtime(*src);
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
    case fooErrorLaunchFailure: return "a kernel failed (its message was printed to stderr)";
    case fooErrorNotPermitted: return "operation not permitted inside a kernel (it would wait for itself)";
    case fooErrorForkedAfterInit:
      return "the foo runtime cannot be used in a process forked after it was initialised; use the 'spawn' "
             "start method (multiprocessing.set_start_method('spawn'), or multiprocessing_context='spawn' for a "
             "DataLoader)";
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
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  if (config().device_count == 0) {
    return fooErrorNoDevice;
  }
  *device = current_device;
  return fooSuccess;
}

fooError_t fooSetDevice(int device) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
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
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  if (!valid_device(device)) {
    return fooErrorInvalidDevice;
  }
  *initialized = devices[device].initialized.load(std::memory_order_relaxed) ? 1 : 0;
  return fooSuccess;
}

fooError_t fooDeviceSynchronize(void) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  if (!valid_device(current_device)) {
    return fooErrorNoDevice;
  }
  if (worker_stream != nullptr && worker_stream->device == current_device) {
    return fooErrorNotPermitted;
  }
  return synchronize_device(current_device);
}

fooError_t fooIsInBadFork(int* bad) {
  if (bad == nullptr) {
    return fooErrorInvalidValue;
  }
  *bad = forked() ? 1 : 0;
  return fooSuccess;
}

fooError_t fooMalloc(void** devPtr, size_t size) {
  if (devPtr == nullptr) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
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
  if (size > config().capacity || arena.size == 0) {
    return fooErrorMemoryAllocation;
  }
  const size_t length = round_up(size, page_size());
  Device& d = devices[device];
  size_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    prepare_memory(d);
    if (length > config().capacity - d.used) {
      return fooErrorMemoryAllocation;
    }
    auto it =
        std::find_if(d.free_ranges.begin(), d.free_ranges.end(), [&](const auto& r) { return r.second >= length; });
    if (it == d.free_ranges.end()) {
      return fooErrorMemoryAllocation;
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
    return fooErrorMemoryAllocation;
  }
  *devPtr = arena.user + start;
  return fooSuccess;
}

fooError_t fooFree(void* devPtr) {
  if (devPtr == nullptr) {
    return fooSuccess;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  if (!is_device_address(devPtr)) {
    return fooErrorInvalidDevicePointer;
  }
  if (worker_stream != nullptr) {
    return fooErrorNotPermitted;
  }
  const int device = arena.device_of(devPtr);
  const size_t offset = arena.offset_of(devPtr);
  Device& d = devices[device];
  size_t length = 0;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    auto it = d.allocations.find(offset);
    if (it == d.allocations.end()) {
      return fooErrorInvalidDevicePointer;
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

fooError_t fooMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  const int device = current_device;
  if (!valid_device(device)) {
    return fooErrorNoDevice;
  }
  Device& d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  *total = config().capacity;
  *free = config().capacity - d.used;
  return fooSuccess;
}

fooError_t fooPointerGetAttributes(fooPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  *attributes = make_attributes(fooMemoryTypeUnregistered, -1, nullptr, 0);
  if (is_device_address(ptr)) {
    const int device = arena.device_of(ptr);
    Device& d = devices[device];
    std::lock_guard<std::mutex> lock(d.mutex);
    if (const auto* a = find_allocation(d, arena.offset_of(ptr), 1)) {
      *attributes =
          make_attributes(fooMemoryTypeDevice, device, arena.user + device * arena.span + a->first, a->second);
    }
    return fooSuccess;
  }
  const auto [base, length] = find_pinned(ptr, 1);
  if (length > 0) {
    *attributes = make_attributes(fooMemoryTypeHost, -1, reinterpret_cast<void*>(base), length);
  }
  return fooSuccess;
}

fooError_t fooMallocHost(void** ptr, size_t size) {
  if (ptr == nullptr) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  init();
  *ptr = nullptr;
  if (size == 0) {
    return fooSuccess;
  }
  // Page-locking is emulated by populating the pages up front, so copies never fault on them.
  // (mlock would pin them for real, but its limit is often a few MiB.)
  const size_t length = round_up(size, page_size());
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    return fooErrorMemoryAllocation;
  }
  std::lock_guard<std::mutex> lock(host_mutex);
  pinned.emplace(reinterpret_cast<uintptr_t>(p), length);
  *ptr = p;
  return fooSuccess;
}

fooError_t fooFreeHost(void* ptr) {
  if (ptr == nullptr) {
    return fooSuccess;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  if (worker_stream != nullptr) {
    return fooErrorNotPermitted;
  }
  size_t length = 0;
  {
    std::lock_guard<std::mutex> lock(host_mutex);
    auto it = pinned.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == pinned.end()) {
      return fooErrorInvalidValue;
    }
    length = it->second;
    pinned.erase(it);
  }
  wait_all_devices(); // an asynchronous copy may still use it
  munmap(ptr, length);
  return fooSuccess;
}

fooError_t fooMemcpy(void* dst, const void* src, size_t count, fooMemcpyKind kind) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  if (const auto err = resolve_copy(&dst, &src, count, kind); err != fooSuccess) {
    return err;
  }
  if (count > 0) {
    std::memcpy(dst, src, count);
  }
  return fooSuccess;
}

fooError_t fooMemcpyAsync(void* dst, const void* src, size_t count, fooMemcpyKind kind, fooStream_t h) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Stream* s = nullptr;
  if (const auto err = get_stream(h, &s); err != fooSuccess) {
    return err;
  }
  const bool host_dst = kind == fooMemcpyHostToHost || kind == fooMemcpyDeviceToHost;
  const bool host_src = kind == fooMemcpyHostToHost || kind == fooMemcpyHostToDevice;
  // Pageable host memory may be freed or reused as soon as this returns, so the copy happens now,
  // in stream order; pinned memory belongs to the caller until the stream has passed the copy.
  const bool pageable =
      (host_dst && find_pinned(dst, count).second == 0) || (host_src && find_pinned(src, count).second == 0);
  if (const auto err = resolve_copy(&dst, &src, count, kind); err != fooSuccess) {
    return err;
  }
  if (count == 0) {
    return fooSuccess;
  }
  if (pageable) {
    if (s == worker_stream) {
      return fooErrorNotPermitted;
    }
    wait_for(s, s->tail.load(std::memory_order_acquire));
    std::memcpy(dst, src, count);
    return fooSuccess;
  }
  Task task;
  task.kind = Task::Kind::Copy;
  task.args = dst;
  task.src = src;
  task.count = count;
  enqueue(s, task);
  return fooSuccess;
}

fooError_t fooMemsetAsync(void* devPtr, int value, size_t count, fooStream_t stream) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Stream* s = nullptr;
  if (const auto err = get_stream(stream, &s); err != fooSuccess) {
    return err;
  }
  if (count == 0) {
    return fooSuccess;
  }
  if (devPtr == nullptr || !is_device_range(devPtr, count)) {
    return fooErrorInvalidDevicePointer;
  }
  Task task;
  task.kind = Task::Kind::Fill;
  task.args = arena.to_runtime(devPtr);
  task.value = value;
  task.count = count;
  enqueue(s, task);
  return fooSuccess;
}

fooError_t fooStreamCreate(fooStream_t* stream) {
  return fooStreamCreateWithPriority(stream, fooStreamDefault, kLeastPriority);
}

fooError_t fooStreamCreateWithPriority(fooStream_t* stream, unsigned int flags, int priority) {
  if (stream == nullptr || (flags & ~static_cast<unsigned>(fooStreamNonBlocking)) != 0) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  const int device = current_device;
  if (!valid_device(device)) {
    return fooErrorNoDevice;
  }
  mark_initialized(device);
  priority = std::clamp(priority, kGreatestPriority, kLeastPriority); // as CUDA does
  std::lock_guard<std::mutex> lock(devices[device].mutex);
  *stream = reinterpret_cast<fooStream_t>(create_stream(device, priority, false));
  return fooSuccess;
}

fooError_t fooStreamDestroy(fooStream_t stream) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Stream* s = nullptr;
  if (stream == nullptr || get_stream(stream, &s) != fooSuccess || s->is_default) {
    return fooErrorInvalidResourceHandle;
  }
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->magic = 0;
    s->stopping = true;
  }
  s->work_ready.notify_one();
  release(s); // the owner's reference; the worker drops its own when it exits
  return fooSuccess;
}

fooError_t fooStreamQuery(fooStream_t stream) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Stream* s = nullptr;
  if (const auto err = get_stream(stream, &s); err != fooSuccess) {
    return err;
  }
  if (s->done.load() < s->tail.load(std::memory_order_acquire)) {
    return fooErrorNotReady;
  }
  return take_error(s);
}

fooError_t fooStreamSynchronize(fooStream_t stream) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Stream* s = nullptr;
  if (const auto err = get_stream(stream, &s); err != fooSuccess) {
    return err;
  }
  if (s == worker_stream) {
    return fooErrorNotPermitted;
  }
  wait_for(s, s->tail.load(std::memory_order_acquire));
  return take_error(s);
}

fooError_t fooStreamWaitEvent(fooStream_t stream, fooEvent_t event, unsigned int flags) {
  if (flags != 0) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Stream* s = nullptr;
  Event* e = nullptr;
  if (const auto err = get_stream(stream, &s); err != fooSuccess) {
    return err;
  }
  if (const auto err = get_event(event, &e); err != fooSuccess) {
    return err;
  }
  Task task;
  task.kind = Task::Kind::Wait;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    task.other = e->stream;
    task.position = e->position;
    if (task.other == nullptr || task.other == s || task.other->done.load() >= task.position) {
      return fooSuccess; // never recorded, already in order, or already complete
    }
    retain(task.other);
  }
  enqueue(s, task);
  return fooSuccess;
}

fooError_t fooStreamGetPriority(fooStream_t stream, int* priority) {
  if (priority == nullptr) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Stream* s = nullptr;
  if (const auto err = get_stream(stream, &s); err != fooSuccess) {
    return err;
  }
  *priority = s->priority;
  return fooSuccess;
}

fooError_t fooStreamGetDevice(fooStream_t stream, int* device) {
  if (device == nullptr) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Stream* s = nullptr;
  if (const auto err = get_stream(stream, &s); err != fooSuccess) {
    return err;
  }
  *device = s->device;
  return fooSuccess;
}

fooError_t fooDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (leastPriority != nullptr) {
    *leastPriority = kLeastPriority;
  }
  if (greatestPriority != nullptr) {
    *greatestPriority = kGreatestPriority;
  }
  return fooSuccess;
}

fooError_t fooEventCreate(fooEvent_t* event) {
  return fooEventCreateWithFlags(event, fooEventDefault);
}

fooError_t fooEventCreateWithFlags(fooEvent_t* event, unsigned int flags) {
  constexpr unsigned kBlockingSync = 0x1; // accepted for CUDA compatibility: waits already sleep
  if (event == nullptr || (flags & ~(kBlockingSync | fooEventDisableTiming)) != 0) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  if (!valid_device(current_device)) {
    return fooErrorNoDevice;
  }
  mark_initialized(current_device);
  auto* e = new Event();
  e->device = current_device;
  e->timing = (flags & fooEventDisableTiming) == 0;
  *event = reinterpret_cast<fooEvent_t>(e);
  return fooSuccess;
}

fooError_t fooEventRecord(fooEvent_t event, fooStream_t stream) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Event* e = nullptr;
  Stream* s = nullptr;
  if (const auto err = get_event(event, &e); err != fooSuccess) {
    return err;
  }
  if (const auto err = get_stream(stream, &s); err != fooSuccess) {
    return err;
  }
  if (s->device != e->device) {
    return fooErrorInvalidResourceHandle;
  }
  Stream* previous = nullptr;
  const auto move_to = [&](uint64_t position) {
    std::lock_guard<std::mutex> lock(e->mutex);
    previous = e->stream;
    retain(s);
    e->stream = s;
    e->position = position;
    e->time_ns = -1;
  };
  if (e->timing) {
    Task task;
    task.kind = Task::Kind::Record;
    task.event = e;
    retain(e);
    enqueue(s, task, move_to); // the worker stamps the time when it reaches the record
  } else {
    move_to(s->tail.load(std::memory_order_acquire)); // complete once the work so far is
  }
  if (previous != nullptr) {
    release(previous);
  }
  return fooSuccess;
}

fooError_t fooEventQuery(fooEvent_t event) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Event* e = nullptr;
  if (const auto err = get_event(event, &e); err != fooSuccess) {
    return err;
  }
  std::lock_guard<std::mutex> lock(e->mutex);
  return e->stream == nullptr || e->stream->done.load() >= e->position ? fooSuccess : fooErrorNotReady;
}

fooError_t fooEventSynchronize(fooEvent_t event) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Event* e = nullptr;
  if (const auto err = get_event(event, &e); err != fooSuccess) {
    return err;
  }
  Stream* s = nullptr;
  uint64_t position = 0;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    s = e->stream;
    position = e->position;
    if (s == nullptr) {
      return fooSuccess;
    }
    retain(s);
  }
  fooError_t result = fooErrorNotPermitted;
  if (s != worker_stream) {
    wait_for(s, position);
    result = take_error(s);
  }
  release(s);
  return result;
}

fooError_t fooEventElapsedTime(float* ms, fooEvent_t start, fooEvent_t end) {
  if (ms == nullptr) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  int64_t times[2] = {0, 0};
  fooEvent_t handles[2] = {start, end};
  for (int i = 0; i < 2; ++i) {
    Event* e = nullptr;
    if (const auto err = get_event(handles[i], &e); err != fooSuccess) {
      return err;
    }
    std::lock_guard<std::mutex> lock(e->mutex);
    if (!e->timing || e->stream == nullptr) {
      return fooErrorInvalidResourceHandle; // created without timing, or never recorded
    }
    if (e->stream->done.load() < e->position || e->time_ns < 0) {
      return fooErrorNotReady;
    }
    times[i] = e->time_ns;
  }
  *ms = static_cast<float>(static_cast<double>(times[1] - times[0]) / 1e6);
  return fooSuccess;
}

fooError_t fooEventDestroy(fooEvent_t event) {
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Event* e = nullptr;
  if (const auto err = get_event(event, &e); err != fooSuccess) {
    return err;
  }
  e->magic = 0;
  release(e); // a pending record holds its own reference
  return fooSuccess;
}

fooError_t fooLaunchKernel(fooKernel_t kernel, void* args, fooStream_t stream) {
  if (kernel == nullptr) {
    return fooErrorInvalidValue;
  }
  if (forked()) {
    return fooErrorForkedAfterInit;
  }
  Stream* s = nullptr;
  if (const auto err = get_stream(stream, &s); err != fooSuccess) {
    return err;
  }
  Task task;
  task.kind = Task::Kind::Kernel;
  task.kernel = kernel;
  task.args = args;
  enqueue(s, task);
  return fooSuccess;
}

void* fooKernelAddress(const void* ptr) {
  if (is_device_address(ptr)) {
    return arena.to_runtime(ptr);
  }
  return const_cast<void*>(ptr);
}

} // extern "C"

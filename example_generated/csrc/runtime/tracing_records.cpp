// The records of tracing.h: correlation ids, the tool's ids, buffering and delivery (see
// tracing_records.h). Kept by a hardware port; the clock is the device layer's (driver::timestamp).
//
// Records go into a buffer per producing thread (host threads, stream workers), guarded by its own,
// practically uncontended, lock; a full buffer is delivered by the thread that filled it, and
// fooTracingFlush delivers what all buffers hold.
#include "tracing_records.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <vector>

#include "driver.h"

namespace torch_foo::tracing {

std::atomic<uint32_t> enabled_kinds{0};

namespace {

constexpr size_t kBatch = 1024; // records a thread buffers before it delivers them

std::atomic<uint32_t> next_correlation{1};

bool kind_enabled(fooActivityKind kind) {
  return (enabled_kinds.load(std::memory_order_relaxed) & (1u << kind)) != 0;
}

uint32_t thread_id() {
  thread_local const auto id = static_cast<uint32_t>(syscall(SYS_gettid));
  return id;
}

// The subscriber. Delivery holds the lock, so a callback never runs after it was unsubscribed.
struct Subscriber {
  std::mutex mutex;
  fooTracingCallback callback = nullptr;
  void* user_data = nullptr;
};

// Never destroyed: stream workers may still record while static destructors run at exit.
Subscriber& subscriber() {
  static auto* s = new Subscriber();
  return *s;
}

void deliver(const std::vector<fooActivityRecord>& records) {
  if (records.empty()) {
    return;
  }
  Subscriber& s = subscriber();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.callback != nullptr) {
    s.callback(records.data(), records.size(), s.user_data);
  }
}

struct Buffer {
  std::mutex mutex;
  std::vector<fooActivityRecord> records;
};

struct Registry {
  std::mutex mutex;
  std::vector<Buffer*> buffers;
  std::vector<fooActivityRecord> orphans; // left by threads that exited before a flush
};

Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

// This thread's buffer, registered on first use; on thread exit its records move to the orphans.
struct LocalBuffer {
  Buffer* buffer = new Buffer();
  LocalBuffer() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.buffers.push_back(buffer);
  }
  ~LocalBuffer() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (size_t i = 0; i < r.buffers.size(); ++i) {
      if (r.buffers[i] == buffer) {
        r.buffers.erase(r.buffers.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
    {
      std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
      r.orphans.insert(r.orphans.end(), buffer->records.begin(), buffer->records.end());
    }
    delete buffer;
  }
  LocalBuffer(const LocalBuffer&) = delete;
  LocalBuffer& operator=(const LocalBuffer&) = delete;
};

void append(const fooActivityRecord& record) {
  thread_local LocalBuffer local;
  std::vector<fooActivityRecord> full;
  {
    std::lock_guard<std::mutex> lock(local.buffer->mutex);
    local.buffer->records.push_back(record);
    if (local.buffer->records.size() >= kBatch) {
      full.swap(local.buffer->records);
    }
  }
  deliver(full);
}

// The tool's ids on this thread, a stack per kind.
std::vector<uint64_t>& external_stack(fooExternalCorrelationKind kind) {
  thread_local std::vector<uint64_t> stacks[fooExternalCorrelationKindCount];
  return stacks[kind];
}

void set_external(uint64_t (&external)[fooExternalCorrelationKindCount]) {
  for (int k = 0; k < fooExternalCorrelationKindCount; ++k) {
    const auto& stack = external_stack(static_cast<fooExternalCorrelationKind>(k));
    external[k] = stack.empty() ? 0 : stack.back();
  }
}

// The traced call in progress on this thread (ApiScope).
struct Call {
  uint32_t correlation = 0; // 0: none
  const char* name = nullptr;
  uint64_t start = 0;
  int device = -1; // the device of the work it enqueued, once known
};

thread_local Call current_call;

fooActivityRecord make_record(
    fooActivityKind kind, uint32_t correlation, const char* name, uint64_t start, uint64_t end) {
  fooActivityRecord r{};
  r.kind = kind;
  r.correlationId = correlation;
  r.start = start;
  r.end = end;
  r.name = name;
  r.device = -1;
  return r;
}

} // namespace

bool ApiScope::begin(const char* name) {
  Call& call = current_call;
  if (call.correlation != 0) {
    return false; // inside another traced call: its work belongs to that one
  }
  call.correlation = next_correlation.fetch_add(1, std::memory_order_relaxed);
  if (call.correlation == 0) { // wrapped around: 0 means "none"
    call.correlation = next_correlation.fetch_add(1, std::memory_order_relaxed);
  }
  call.name = name;
  call.device = -1;
  call.start = driver::timestamp();
  return true;
}

void ApiScope::end() {
  Call& call = current_call;
  if (kind_enabled(fooActivityKindRuntime)) {
    auto r = make_record(fooActivityKindRuntime, call.correlation, call.name, call.start, driver::timestamp());
    set_external(r.externalId);
    r.device = call.device;
    r.threadId = thread_id();
    append(r);
  }
  call.correlation = 0;
}

const Tag* make_tag(fooActivityKind kind, const char* name, int device, int detail) {
  if (!kind_enabled(kind)) {
    return nullptr;
  }
  Call& call = current_call;
  if (call.correlation != 0) {
    call.device = device;
  }
  thread_local Tag tag;
  tag.correlation = call.correlation;
  tag.thread = thread_id();
  set_external(tag.external);
  tag.name = name;
  tag.detail = detail;
  return &tag;
}

void record_device(
    const Tag& tag,
    fooActivityKind kind,
    int device,
    uint32_t stream,
    uint32_t flags,
    uint64_t bytes,
    uint64_t start,
    uint64_t end) {
  auto r = make_record(kind, tag.correlation, tag.name, start, end);
  for (int k = 0; k < fooExternalCorrelationKindCount; ++k) {
    r.externalId[k] = tag.external[k];
  }
  r.bytes = bytes;
  r.device = device;
  r.stream = stream;
  r.threadId = tag.thread;
  r.flags = flags;
  r.detail = tag.detail;
  append(r);
}

void record_host_copy(
    fooMemcpyKind kind, int device, uint32_t stream, uint64_t bytes, uint64_t start, uint32_t stream_flags) {
  if (const Tag* tag = device_tag(fooActivityKindMemcpy, copy_name(kind), device, kind)) {
    record_device(*tag, fooActivityKindMemcpy, device, stream, stream_flags, bytes, start, driver::timestamp());
  }
}

uint64_t SyncScope::begin() {
  return kind_enabled(fooActivityKindSynchronization) ? driver::timestamp() : 0;
}

void SyncScope::end() const {
  static const char* const names[] = {"Stream Synchronize", "Event Synchronize", "Device Synchronize"};
  auto r = make_record(fooActivityKindSynchronization, 0, names[kind_], start_, driver::timestamp());
  set_external(r.externalId);
  r.device = device_;
  r.stream = stream_;
  r.threadId = thread_id();
  r.detail = kind_;
  append(r);
}

fooError_t subscribe(fooTracingCallback callback, void* user_data) {
  Subscriber& s = subscriber();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (callback != nullptr && s.callback != nullptr && (s.callback != callback || s.user_data != user_data)) {
    return fooErrorNotPermitted;
  }
  s.callback = callback;
  s.user_data = callback != nullptr ? user_data : nullptr;
  return fooSuccess;
}

void enable(fooActivityKind kind, bool on) {
  const uint32_t bit = 1u << kind;
  if (on) {
    enabled_kinds.fetch_or(bit);
  } else {
    enabled_kinds.fetch_and(~bit);
  }
}

void flush() {
  std::vector<fooActivityRecord> all;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    all.swap(r.orphans);
    for (Buffer* buffer : r.buffers) {
      std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
      all.insert(all.end(), buffer->records.begin(), buffer->records.end());
      buffer->records.clear();
    }
  }
  deliver(all);
}

void push_external(fooExternalCorrelationKind kind, uint64_t id) {
  external_stack(kind).push_back(id);
}

bool pop_external(fooExternalCorrelationKind kind, uint64_t* id) {
  auto& stack = external_stack(kind);
  if (stack.empty()) {
    return false;
  }
  if (id != nullptr) {
    *id = stack.back();
  }
  stack.pop_back();
  return true;
}

} // namespace torch_foo::tracing

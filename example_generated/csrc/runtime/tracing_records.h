// How the runtime makes the records of tracing.h: the part of tracing that is not about the device,
// kept by a hardware port like the entry points.
//
// Three places produce records. The entry points (api_*.cpp) bracket each call that gives the
// device work with an ApiScope, which stamps the call (a Runtime record) and opens the correlation
// id its device work carries. The device layer asks device_tag() for the tag of each piece of work
// it enqueues, keeps the tag with the work, and calls record_device() once the device has run it,
// with start and end on driver::timestamp()'s clock (the emulation: its stream workers; a hardware
// driver: the device's own trace buffer or completion timestamps). The device layer also brackets
// each host wait with a SyncScope, and reports a copy it ran on the calling thread with
// record_host_copy(). Records go into a buffer per producing thread and reach the subscriber in
// batches (tracing_records.cpp).
//
// While nothing is enabled, each of these does one relaxed atomic load and nothing else.
#pragma once

#include <atomic>
#include <cstdint>

#include "tracing.h"

namespace torch_foo::tracing {

extern std::atomic<uint32_t> enabled_kinds; // bit (1 << kind) per enabled fooActivityKind

inline bool any_enabled() {
  return enabled_kinds.load(std::memory_order_relaxed) != 0;
}

// What a device record needs from the call that enqueued its work: the device layer keeps it
// beside the work until the work has run.
struct Tag {
  uint32_t correlation = 0; // the enqueuing call's, 0 if the work was enqueued outside a traced call
  uint32_t thread = 0;
  uint64_t external[fooExternalCorrelationKindCount] = {0, 0};
  const char* name = nullptr;
  int detail = 0;
};

// A runtime call that gives the device work (entry points): its Runtime record, and the correlation
// id that device_tag() hands to the work it enqueues. Nested scopes on one thread are one call.
class ApiScope {
 public:
  explicit ApiScope(const char* name) : active_(any_enabled() && begin(name)) {}
  ~ApiScope() {
    if (active_) {
      end();
    }
  }
  ApiScope(const ApiScope&) = delete;
  ApiScope& operator=(const ApiScope&) = delete;

 private:
  static bool begin(const char* name);
  static void end();

  bool active_;
};

const Tag* make_tag(fooActivityKind kind, const char* name, int device, int detail);

// The tag of work of `kind` on `device` that the calling thread enqueues now, or null if `kind` is
// not enabled. Valid until the thread's next call: the device layer copies it.
inline const Tag* device_tag(fooActivityKind kind, const char* name, int device, int detail = 0) {
  return any_enabled() ? make_tag(kind, name, device, detail) : nullptr;
}

// The device has run tagged work of `kind` on `stream` (tracing.h's id) from `start` to `end`
// (an event record: start == end). `flags` are tracing.h's fooActivityFlag*.
void record_device(
    const Tag& tag,
    fooActivityKind kind,
    int device,
    uint32_t stream,
    uint32_t flags,
    uint64_t bytes,
    uint64_t start,
    uint64_t end);

// The name of a copy's records ("Memcpy HtoD", ...).
inline const char* copy_name(fooMemcpyKind kind) {
  static const char* const names[] = {"Memcpy HtoH", "Memcpy HtoD", "Memcpy DtoH", "Memcpy DtoD"};
  return names[kind];
}

// A copy the calling thread ran itself, from `start` until now: a synchronous copy (stream 0) or a
// copy from or to pageable memory, in the order of `stream` (`stream_flags`: fooActivityFlagDefaultStream
// if it is its device's default stream, whose track the profiler names so).
void record_host_copy(
    fooMemcpyKind kind, int device, uint32_t stream, uint64_t bytes, uint64_t start, uint32_t stream_flags = 0);

// A host thread waiting for a stream, an event or a device.
class SyncScope {
 public:
  SyncScope(fooSynchronizationKind kind, int device, uint32_t stream)
      : start_(any_enabled() ? begin() : 0), kind_(kind), device_(device), stream_(stream) {}
  ~SyncScope() {
    if (start_ != 0) {
      end();
    }
  }
  SyncScope(const SyncScope&) = delete;
  SyncScope& operator=(const SyncScope&) = delete;

 private:
  static uint64_t begin(); // the start, or 0 if synchronisations are not recorded
  void end() const;

  uint64_t start_;
  fooSynchronizationKind kind_;
  int device_;
  uint32_t stream_;
};

// What the tracing entry points (api_tracing.cpp) work on: the one subscriber, the enabled kinds,
// the per-thread stacks of the tool's ids, and the buffered records.
fooError_t subscribe(fooTracingCallback callback, void* user_data); // NotPermitted if taken
void enable(fooActivityKind kind, bool on);
void flush();
void push_external(fooExternalCorrelationKind kind, uint64_t id);
bool pop_external(fooExternalCorrelationKind kind, uint64_t* id); // false if the stack is empty

} // namespace torch_foo::tracing

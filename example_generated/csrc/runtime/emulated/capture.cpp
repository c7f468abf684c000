// Stream capture on the emulated foo device: a capturing stream records its tasks instead of
// running them.
//
// A capture starts on one stream (its origin). enqueue() hands every task submitted to a capturing
// stream to capture_task(), which appends it to the capture's node list with its dependencies: the
// previous node of the same stream, and the nodes other streams had reached when they recorded the
// events this stream waited for. An event recorded on a capturing stream enqueues nothing: it
// remembers (capture, stream, last node), and a stream that waits for it joins the capture. Since
// every dependency points to a node recorded earlier, the recording order is a valid order to run
// them in: end_capture() hands the nodes over in that order (the graph calls make an executable
// graph of them, which a stream runs as one task); the dependencies are kept for the dot dump and
// the join check.
//
// Captures are guarded by one mutex: it is taken only while some stream captures and by the capture
// calls. The checks that every submission and every synchronising call make read the stream's
// capture pointer, or the number of active captures, and return at once when there is none; the
// rest of each check is a cold function of its own, so that the first part inlines into the calls.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "../internal.h"
#include "emulated.h"
#include "handles.h"

namespace torch_foo::emulated {

struct Capture {
  uint64_t id = 0;
  int device = 0;
  fooStreamCaptureMode mode = fooStreamCaptureModeGlobal;
  std::thread::id thread;
  Stream* origin = nullptr;
  struct Member {
    Stream* stream; // holds a reference
    int64_t last_node = -1;
    bool joined = true; // its work so far is waited for by another stream of the capture
    std::vector<int64_t> waits; // nodes its next node depends on
  };
  std::vector<Member> members;
  std::vector<Task> nodes;
  std::vector<CapturedNode> info;
  bool invalidated = false;
  std::string reason; // why it was invalidated

  Member* member(const Stream* stream) {
    for (Member& m : members) {
      if (m.stream == stream) {
        return &m;
      }
    }
    return nullptr;
  }
};

namespace {

std::mutex& capture_mutex() {
  static auto* mutex = new std::mutex(); // never destroyed, as the streams it guards
  return *mutex;
}

std::vector<Capture*>& active_captures() { // guarded by capture_mutex()
  static auto* active = new std::vector<Capture*>();
  return *active;
}

std::atomic<int> active_count{0}; // active_captures().size(), read without the mutex

const char* capture_mode_name(fooStreamCaptureMode mode) {
  switch (mode) {
    case fooStreamCaptureModeGlobal: return "global";
    case fooStreamCaptureModeThreadLocal: return "thread_local";
    case fooStreamCaptureModeRelaxed: return "relaxed";
  }
  return "unknown";
}

Capture* find_capture(uint64_t id) { // caller holds capture_mutex()
  for (Capture* c : active_captures()) {
    if (c->id == id) {
      return c;
    }
  }
  return nullptr;
}

void invalidate_capture(Capture* c, const std::string& reason) { // caller holds capture_mutex()
  if (!c->invalidated) {
    c->invalidated = true;
    c->reason = reason;
  }
}

// Invalidates `c` because of `call` and describes the failure.
fooError_t capture_conflict(Capture* c, const char* call, fooError_t code) {
  const std::string reason = std::string(call) + " during stream capture";
  invalidate_capture(c, reason);
  return runtime::fail(
      code,
      "%s is not permitted while a stream captures (capture %llu on device %d, mode %s); the capture is invalidated",
      call,
      static_cast<unsigned long long>(c->id),
      c->device,
      capture_mode_name(c->mode));
}

// Ends capture `c`: its streams work normally again. Caller holds capture_mutex(), then owns `c`.
void finish_capture(Capture* c) {
  for (Capture::Member& m : c->members) {
    set_capturing(m.stream, nullptr);
    release(m.stream);
  }
  auto& active = active_captures();
  active.erase(std::find(active.begin(), active.end(), c));
  active_count.store(static_cast<int>(active.size()), std::memory_order_release);
}

std::string node_label(const Task& task) {
  char text[128];
  switch (task.kind) {
    case Task::Kind::Kernel: {
      const char* name = kernel_name(task.function);
      std::snprintf(text, sizeof(text), "%s <<<%u,%u>>>", name, task.grid.x * task.grid.y * task.grid.z, task.block.x);
      return text;
    }
    case Task::Kind::Copy: std::snprintf(text, sizeof(text), "copy %zu bytes", task.count); return text;
    case Task::Kind::Fill: std::snprintf(text, sizeof(text), "fill %zu bytes", task.count); return text;
    case Task::Kind::HostFunc: return "host function";
    case Task::Kind::Native: return std::string("native ") + task.name;
    case Task::Kind::Graph: return "graph";
    case Task::Kind::Record:
    case Task::Kind::Wait: break;
  }
  return "?";
}

fooError_t unknown_capture_stream(fooStream_t handle) {
  return runtime::fail(fooErrorInvalidResourceHandle, "unknown stream %p", static_cast<void*>(handle));
}

} // namespace

void capture_task(Capture* c, Stream* s, Task&& task) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  Capture::Member* m = c->member(s);
  if (c->invalidated || m == nullptr) { // submitted while another thread invalidated it: dropped
    discard(task);
    return;
  }
  const auto index = static_cast<int64_t>(c->nodes.size());
  CapturedNode info;
  info.stream = stream_trace_id_of(s);
  info.label = node_label(task);
  if (m->last_node >= 0) {
    info.deps.push_back(m->last_node);
  }
  info.deps.insert(info.deps.end(), m->waits.begin(), m->waits.end());
  m->waits.clear();
  m->last_node = index;
  m->joined = s == c->origin;
  task.traced = false;
  task.fault = 0; // fault injection counts launches that run
  c->nodes.push_back(std::move(task));
  c->info.push_back(std::move(info));
}

namespace {

// What capture_check() does while some stream captures.
[[gnu::cold, gnu::noinline]] fooError_t capture_check_while_capturing(Stream* s) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  Capture* c = capturing(s);
  if (c == nullptr || !c->invalidated) {
    return fooSuccess;
  }
  return runtime::fail(
      fooErrorStreamCaptureInvalidated,
      "the capture this stream records into was invalidated by %s",
      c->reason.c_str());
}

} // namespace

fooError_t capture_check(Stream* s) {
  return __builtin_expect(capturing(s) == nullptr, 1) ? fooSuccess : capture_check_while_capturing(s);
}

namespace {

// What stream_capture_conflict() does while some stream captures.
[[gnu::cold, gnu::noinline]] fooError_t stream_capture_conflict_while_capturing(
    Stream* s, const char* call, fooError_t code) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  Capture* c = capturing(s);
  return c == nullptr ? fooSuccess : capture_conflict(c, call, code);
}

} // namespace

fooError_t stream_capture_conflict(Stream* s, const char* call, fooError_t code) {
  return __builtin_expect(capturing(s) == nullptr, 1) ? fooSuccess
                                                      : stream_capture_conflict_while_capturing(s, call, code);
}

namespace {

// What device_capture_conflict() does while some stream captures.
[[gnu::cold, gnu::noinline]] fooError_t device_capture_conflict_while_capturing(int device, const char* call) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  fooError_t result = fooSuccess;
  for (Capture* c : active_captures()) {
    for (const Capture::Member& m : c->members) {
      if (stream_device_of(m.stream) == device) {
        result = capture_conflict(c, call, fooErrorStreamCaptureUnsupported);
        break;
      }
    }
  }
  return result;
}

} // namespace

fooError_t device_capture_conflict(int device, const char* call) {
  return __builtin_expect(active_count.load(std::memory_order_acquire) == 0, 1)
      ? fooSuccess
      : device_capture_conflict_while_capturing(device, call);
}

namespace {

// What event_capture_conflict() does while some stream captures.
[[gnu::cold, gnu::noinline]] fooError_t event_capture_conflict_while_capturing(uint64_t id, const char* call) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  Capture* c = find_capture(id);
  const std::string what = std::string(call) + " of an event recorded in the capture";
  return c == nullptr ? fooSuccess : capture_conflict(c, what.c_str(), fooErrorStreamCaptureUnsupported);
}

} // namespace

fooError_t event_capture_conflict(uint64_t id, const char* call) {
  return __builtin_expect(id == 0, 1) ? fooSuccess : event_capture_conflict_while_capturing(id, call);
}

void capture_record(Stream* s, uint64_t* id, int64_t* node) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  Capture* c = capturing(s);
  Capture::Member* m = c != nullptr ? c->member(s) : nullptr;
  *id = c != nullptr ? c->id : 0;
  *node = m != nullptr ? m->last_node : -1;
}

fooError_t capture_wait(Stream* s, uint64_t id, const Stream* from, int64_t node) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  Capture* c = find_capture(id);
  if (c == nullptr) {
    return fooSuccess; // that capture has ended: its events count as complete
  }
  Capture* own = capturing(s);
  if (own != nullptr && own != c) {
    const char* call = "waiting for an event recorded in another capture";
    capture_conflict(own, call, fooErrorStreamCaptureIsolation);
    return capture_conflict(c, call, fooErrorStreamCaptureIsolation);
  }
  if (stream_device_of(s) != c->device) {
    return capture_conflict(c, "a stream of another device joining the capture", fooErrorStreamCaptureIsolation);
  }
  if (own == nullptr) { // joins the capture
    retain(s);
    c->members.push_back({s, -1, true, {}});
    set_capturing(s, c);
  }
  Capture::Member* waiter = c->member(s);
  if (node >= 0) {
    waiter->waits.push_back(node);
  }
  Capture::Member* source = c->member(from);
  if (source != nullptr && source != waiter && source->last_node <= node) {
    source->joined = true;
  }
  return fooSuccess;
}

fooError_t end_capture(Stream* s, CapturedWork* work) {
  std::unique_ptr<Capture> c;
  {
    std::lock_guard<std::mutex> lock(capture_mutex());
    Capture* current = capturing(s);
    if (current == nullptr) {
      return runtime::fail(fooErrorInvalidValue, "the stream does not capture");
    }
    if (current->origin != s) {
      const char* message = "the capture must end on the stream it began on, not on one that joined it";
      return runtime::fail(fooErrorStreamCaptureUnjoined, "%s", message);
    }
    finish_capture(current);
    c.reset(current);
  }
  fooError_t error = fooSuccess;
  if (c->invalidated) {
    error = runtime::fail(fooErrorStreamCaptureInvalidated, "the capture was invalidated by %s", c->reason.c_str());
  } else {
    for (const Capture::Member& m : c->members) {
      if (!m.joined) {
        error = runtime::fail(
            fooErrorStreamCaptureUnjoined,
            "stream %u joined the capture but its last work was not waited for by the capture's streams",
            stream_trace_id_of(m.stream));
        break;
      }
    }
  }
  if (error != fooSuccess) {
    for (Task& task : c->nodes) {
      discard(task);
    }
    return error;
  }
  work->device = c->device;
  work->nodes = std::move(c->nodes);
  work->info = std::move(c->info);
  return fooSuccess;
}

} // namespace torch_foo::emulated

namespace torch_foo::driver {

using namespace emulated;

fooError_t stream_begin_capture(fooStream_t handle, fooStreamCaptureMode mode) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_capture_stream(handle);
  }
  static std::atomic<uint64_t> next_id{1};
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (capturing(s) != nullptr) {
    return runtime::fail(fooErrorStreamCaptureUnsupported, "the stream already captures");
  }
  auto* c = new Capture();
  c->id = next_id.fetch_add(1, std::memory_order_relaxed);
  c->device = stream_device_of(s);
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->origin = s;
  retain(s);
  c->members.push_back({s, -1, true, {}});
  active_captures().push_back(c);
  active_count.store(static_cast<int>(active_captures().size()), std::memory_order_release);
  set_capturing(s, c);
  return fooSuccess;
}

fooError_t stream_capture_info(fooStream_t handle, fooStreamCaptureStatus* status, unsigned long long* id) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_capture_stream(handle);
  }
  *status = fooStreamCaptureStatusNone;
  *id = 0;
  if (capturing(s) == nullptr) {
    return fooSuccess;
  }
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (const Capture* c = capturing(s); c != nullptr) {
    *status = c->invalidated ? fooStreamCaptureStatusInvalidated : fooStreamCaptureStatusActive;
    *id = c->id;
  }
  return fooSuccess;
}

namespace {

// The "potentially unsafe" calls: prohibited on a thread with a capture that is not relaxed, and on
// every thread while a global capture runs (CUDA's cudaStreamCaptureMode).
[[gnu::cold, gnu::noinline]] fooError_t capture_permits_unsafe_call_while_capturing(const char* call) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  const auto me = std::this_thread::get_id();
  fooError_t result = fooSuccess;
  for (Capture* c : active_captures()) {
    const bool own = c->thread == me;
    if ((own && c->mode != fooStreamCaptureModeRelaxed) || (!own && c->mode == fooStreamCaptureModeGlobal)) {
      result = capture_conflict(c, call, fooErrorStreamCaptureUnsupported);
    }
  }
  return result;
}

} // namespace

fooError_t capture_permits_unsafe_call(const char* call) {
  return __builtin_expect(active_count.load(std::memory_order_acquire) == 0, 1)
      ? fooSuccess
      : capture_permits_unsafe_call_while_capturing(call);
}

} // namespace torch_foo::driver

// Events of the emulated foo device: a (stream, position) pair, complete once the stream has
// finished that many tasks. A timing event also enqueues a task, so that the worker stamps the
// time when it reaches the record; an event without timing costs no task at all.
#include "../internal.h"
#include "emulated.h"
#include "handles.h"

namespace torch_foo::emulated {
struct Event {
  int device = 0;
  bool timing = true;
  std::atomic<int> refs{1};
  std::mutex mutex; // guards the fields below
  Stream* stream = nullptr; // where the event was last recorded (holds a reference); null if never
  uint64_t position = 0;
  int64_t time_ns = -1; // when the last record was reached (timing events)
  // Recorded last in this capture (0: not in a capture), on that stream after that node.
  uint64_t capture = 0;
  const Stream* captured_on = nullptr;
  int64_t captured_node = -1;
};

namespace {

Event* event_from_handle(fooEvent_t handle) {
  return find_handle<Event>(HandleKind::Event, handle);
}

fooError_t unknown_event(fooEvent_t handle) {
  return runtime::fail(fooErrorInvalidResourceHandle, "unknown event %p", static_cast<void*>(handle));
}

void retain(Event* e) {
  e->refs.fetch_add(1, std::memory_order_relaxed);
}

} // namespace

void release(Event* e) {
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (e->stream != nullptr) {
      release(e->stream);
    }
    delete e;
  }
}

void stamp_event(Event* e, Stream* stream, uint64_t position) {
  std::lock_guard<std::mutex> lock(e->mutex);
  if (e->stream == stream && e->position == position) { // not recorded again elsewhere meanwhile
    e->time_ns = now_ns();
  }
}

} // namespace torch_foo::emulated

namespace torch_foo::driver {

using namespace emulated;

fooError_t event_create(int device, bool timing, fooEvent_t* event) {
  auto* e = new Event();
  e->device = device;
  e->timing = timing;
  *event = add_handle<fooEvent_t>(HandleKind::Event, e);
  return fooSuccess;
}

fooError_t event_record(fooEvent_t event, fooStream_t stream) {
  Event* e = event_from_handle(event);
  if (e == nullptr) {
    return unknown_event(event);
  }
  Stream* s = stream_from_handle(stream);
  if (s == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown stream %p", static_cast<void*>(stream));
  }
  if (stream_device_of(s) != e->device) {
    return runtime::fail(
        fooErrorInvalidResourceHandle,
        "an event of device %d cannot be recorded on a stream of device %d",
        e->device,
        stream_device_of(s));
  }
  if (const auto err = capture_check(s); err != fooSuccess) {
    return err;
  }
  // fault injection
  if (const auto fault = inject(Fault::Event, fooErrorUnknown); fault != fooSuccess) {
    return fault;
  }
  Stream* previous = nullptr;
  if (__builtin_expect(capturing(s) != nullptr, 0)) { // a point in the capture, for other streams to wait for
    uint64_t id = 0;
    int64_t node = -1;
    capture_record(s, &id, &node);
    {
      std::lock_guard<std::mutex> lock(e->mutex);
      previous = e->stream;
      e->stream = nullptr;
      e->time_ns = -1;
      e->capture = id;
      e->captured_on = s;
      e->captured_node = node;
    }
    if (previous != nullptr) {
      release(previous);
    }
    return fooSuccess;
  }
  auto move_to = [&](uint64_t position) {
    std::lock_guard<std::mutex> lock(e->mutex);
    previous = e->stream;
    retain(s);
    e->stream = s;
    e->position = position;
    e->time_ns = -1;
    e->capture = 0;
  };
  if (e->timing) {
    Task task;
    task.kind = Task::Kind::Record;
    task.event = e;
    retain(e);
    // The event moves to its record's position before the worker can reach the record.
    const auto on_position = [](void* move, uint64_t position) { (*static_cast<decltype(move_to)*>(move))(position); };
    enqueue(s, std::move(task), trace_tag(s, fooActivityKindEvent, "Event Record"), on_position, &move_to);
  } else {
    move_to(stream_tail(s)); // complete once the work so far is
  }
  if (previous != nullptr) {
    release(previous);
  }
  return fooSuccess;
}

fooError_t event_query(fooEvent_t event) {
  Event* e = event_from_handle(event);
  if (e == nullptr) {
    return unknown_event(event);
  }
  std::lock_guard<std::mutex> lock(e->mutex);
  if (const auto conflict = event_capture_conflict(e->capture, "fooEventQuery"); conflict != fooSuccess) {
    return conflict;
  }
  return e->stream == nullptr || reached(e->stream, e->position) ? fooSuccess : fooErrorNotReady;
}

fooError_t event_synchronize(fooEvent_t event) {
  Event* e = event_from_handle(event);
  if (e == nullptr) {
    return unknown_event(event);
  }
  Stream* s = nullptr;
  uint64_t position = 0;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    const char* call = "fooEventSynchronize";
    if (const auto conflict = event_capture_conflict(e->capture, call); conflict != fooSuccess) {
      return conflict;
    }
    s = e->stream;
    position = e->position;
    if (s == nullptr) {
      return fooSuccess;
    }
    retain(s);
  }
  fooError_t result = fooSuccess;
  if (s == worker_stream()) {
    result = runtime::fail(fooErrorNotPermitted, "work running on a stream cannot wait for that stream");
  } else {
    const StreamWaitTrace trace(fooSynchronizationEvent, s); // [tracing]
    wait_for(s, position);
    result = take_error(s);
  }
  release(s);
  return result;
}

fooError_t event_elapsed_time(float* ms, fooEvent_t start, fooEvent_t end) {
  int64_t times[2] = {0, 0};
  const fooEvent_t handles[2] = {start, end};
  for (int i = 0; i < 2; ++i) {
    Event* e = event_from_handle(handles[i]);
    if (e == nullptr) {
      return unknown_event(handles[i]);
    }
    std::lock_guard<std::mutex> lock(e->mutex);
    if (!e->timing) {
      return runtime::fail(fooErrorInvalidResourceHandle, "an event created without timing has no time");
    }
    if (e->stream == nullptr) {
      return runtime::fail(fooErrorInvalidResourceHandle, "an event that was never recorded has no time");
    }
    if (!reached(e->stream, e->position) || e->time_ns < 0) {
      return fooErrorNotReady;
    }
    times[i] = e->time_ns;
  }
  *ms = static_cast<float>(static_cast<double>(times[1] - times[0]) / 1e6);
  return fooSuccess;
}

fooError_t event_destroy(fooEvent_t event) {
  Event* e = remove_handle<Event>(HandleKind::Event, event);
  if (e == nullptr) {
    return unknown_event(event);
  }
  release(e); // a pending record holds its own reference
  return fooSuccess;
}

fooError_t stream_wait_event(fooStream_t stream, fooEvent_t event) {
  Stream* s = stream_from_handle(stream);
  if (s == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown stream %p", static_cast<void*>(stream));
  }
  Event* e = event_from_handle(event);
  if (e == nullptr) {
    return unknown_event(event);
  }
  if (const auto err = capture_check(s); err != fooSuccess) {
    return err;
  }
  Task task;
  task.kind = Task::Kind::Wait;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    if (__builtin_expect(e->capture != 0, 0)) { // recorded in a capture: join it, or depend on it inside it
      return capture_wait(s, e->capture, e->captured_on, e->captured_node);
    }
    task.other = e->stream;
    task.position = e->position;
    if (task.other == nullptr || task.other == s || reached(task.other, task.position)) {
      return fooSuccess; // never recorded, already in order, or already complete
    }
    if (capturing(s) != nullptr) { // a graph cannot wait for work outside it
      const char* call = "waiting for an event recorded outside the capture";
      return stream_capture_conflict(s, call, fooErrorStreamCaptureIsolation);
    }
    retain(task.other);
  }
  enqueue(s, std::move(task));
  return fooSuccess;
}

} // namespace torch_foo::driver

// Streams of the emulated foo device: a worker thread per stream runs its tasks in order.
//
// A stream's queue is a ring of kQueueCapacity tasks; a launch that finds it full waits, as a
// device's command queue makes the host wait. A thread that waits (a worker with nothing to do, a
// host thread synchronising) spins briefly and then sleeps, so that a stream that is kept busy
// never pays for a sleep and wake-up while an idle one costs nothing. Positions in a stream are task
// counts: the worker runs task number `done + 1` in place, then publishes `done`.
//
// Tracing. A task enqueued with a tag (tracing_records.h: the call that enqueued it was traced) has
// its tag in a ring beside the queue, allocated the first time the stream traces anything, so that
// untraced tasks stay as they were; the worker stamps the task's start and end around its run.
//
// Lifetime. Streams are reference counted (the owner, the worker, events recorded on them and waits
// of other streams hold references). Everything a worker touches is allocated once and never
// destroyed, so C++ static destruction at process exit cannot pull state from under a worker that
// is still running. What kernels call (PyTorch's CPU operators, OpenMP) is not ours, though, and is
// torn down at exit: so exit first drains the work queued so far, then stops the workers, which
// from then on discard tasks instead of running them (work that other threads still queue while the
// process exits), and waits for the task each may still be running (devices.cpp registers this).
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "../internal.h"
#include "emulated.h"
#include "handles.h"

namespace torch_foo::emulated {

void (*activity_hook)(int device, Activity activity, bool starts) = nullptr;

namespace {

constexpr uint64_t kQueueCapacity = 1024; // tasks a stream holds before launches wait
// How long a waiting thread spins before it sleeps: a stream worker after its last task, a host
// thread in a synchronising call.
constexpr std::chrono::microseconds kWorkerSpin{100};
constexpr std::chrono::microseconds kHostSpin{20};

thread_local Stream* current_worker = nullptr; // set on stream worker threads
std::atomic<bool> stopped{false}; // the process is exiting: workers discard their tasks

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

} // namespace

struct Stream {
  fooStream_t handle = nullptr; // what the runtime's users name it by (handles.h)
  uint32_t id = 0; // [tracing] unique in the process
  int device = 0;
  int priority = 0;
  bool is_default = false;
  std::atomic<int> refs{1};
  std::mutex mutex;
  std::condition_variable work_ready; // the worker sleeps here when the queue is empty
  std::condition_variable work_done; // host threads sleep here when they wait for the stream
  std::vector<Task> queue = std::vector<Task>(kQueueCapacity); // a ring; slot (position - 1) % capacity
  std::atomic<uint64_t> tail{0}; // tasks enqueued (written under mutex)
  std::atomic<uint64_t> done{0}; // tasks finished (written by the worker only)
  bool worker_sleeping = false; // guarded by mutex
  bool stopping = false; // guarded by mutex: destroyed, the worker exits once the queue is empty
  std::atomic<int> waiters{0}; // threads sleeping on work_done
  std::atomic<bool> failed{false}; // a kernel failed since the last synchronisation ...
  std::string failure; // ... with this message (guarded by mutex)
  std::unique_ptr<tracing::Tag[]> tags; // [tracing] beside each queued traced task, made on first use
  std::atomic<Capture*> capture{nullptr}; // the capture it records into (capture.cpp), null mostly
};

namespace {

struct DeviceStreams {
  std::mutex mutex; // guards streams
  std::vector<Stream*> streams; // live streams
  std::atomic<Stream*> default_stream{nullptr};
};

DeviceStreams& device_streams(int device) {
  static auto* all = new DeviceStreams[FOO_MAX_DEVICES]; // never destroyed (see Lifetime above)
  return all[device];
}

void run(Stream* s, Task& task, uint64_t position) {
  switch (task.kind) {
    case Task::Kind::Kernel:
    case Task::Kind::HostFunc:
    case Task::Kind::Copy:
    case Task::Kind::Fill:
    case Task::Kind::Graph:
    case Task::Kind::Native:
      run_work(s, task);
      discard(task);
      break;
    case Task::Kind::Record:
      stamp_event(task.event, s, position);
      release(task.event);
      break;
    case Task::Kind::Wait:
      wait_for(task.other, task.position);
      release(task.other);
      break;
  }
}

// Runs a task, telling activity_hook (when set) how long a kernel, graph, copy or fill kept the device busy.
void run_observed(Stream* s, Task& task, uint64_t position) {
  const auto hook = activity_hook;
  if (__builtin_expect(hook == nullptr, 1)) {
    run(s, task, position);
    return;
  }
  const bool compute =
      task.kind == Task::Kind::Kernel || task.kind == Task::Kind::Graph || task.kind == Task::Kind::Native;
  const bool memory = task.kind == Task::Kind::Copy || task.kind == Task::Kind::Fill;
  if (!compute && !memory) {
    run(s, task, position);
    return;
  }
  const Activity activity = compute ? Activity::Compute : Activity::Memory;
  hook(s->device, activity, true);
  run(s, task, position);
  hook(s->device, activity, false);
}

// [tracing] The device record of a traced task the worker ran from `start` until now.
void trace_task(const Stream* s, const Task& task, uint64_t position, uint64_t start) {
  // Host functions and waits are never traced; a graph or native work is one kernel record.
  auto kind = fooActivityKindKernel;
  if (task.kind == Task::Kind::Copy) {
    kind = fooActivityKindMemcpy;
  } else if (task.kind == Task::Kind::Fill) {
    kind = fooActivityKindMemset;
  } else if (task.kind == Task::Kind::Record) {
    kind = fooActivityKindEvent;
  }
  const uint64_t end = kind == fooActivityKindEvent ? start : driver::timestamp();
  const uint32_t flags = s->is_default ? fooActivityFlagDefaultStream : 0;
  const tracing::Tag& tag = s->tags[(position - 1) % kQueueCapacity];
  tracing::record_device(tag, kind, s->device, s->id, flags, task.count, start, end);
}

void worker_main(Stream* s) {
  runtime::set_current_device(s->device);
  current_worker = s;
  const std::string name = std::string("foo").substr(0, 8) + " dev" + std::to_string(s->device);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  for (;;) {
    const uint64_t finished = s->done.load(std::memory_order_relaxed);
    if (s->tail.load(std::memory_order_acquire) == finished) {
      spin_until([&] { return s->tail.load(std::memory_order_acquire) != finished; }, kWorkerSpin);
      std::unique_lock<std::mutex> lock(s->mutex);
      s->worker_sleeping = true;
      s->work_ready.wait(lock, [&] { return s->tail.load(std::memory_order_relaxed) != finished || s->stopping; });
      s->worker_sleeping = false;
      if (s->tail.load(std::memory_order_relaxed) == finished) {
        break; // stopping and drained
      }
    }
    const uint64_t position = finished + 1;
    Task& task = s->queue[(position - 1) % kQueueCapacity];
    const uint64_t traced_from = task.traced ? driver::timestamp() : 0; // [tracing]
    if (stopped.load(std::memory_order_acquire)) {
      discard(task);
    } else {
      run_observed(s, task, position);
      if (traced_from != 0) {
        trace_task(s, task, position, traced_from);
      }
    }
    // Sequentially consistent, not just a release: a waiting thread increments `waiters`, then tests
    // `done`; a release store may be overtaken by the load below (x86 reorders a store with a later
    // load), the worker then sees no waiter while the waiter sees the old `done`, and sleeps forever.
    s->done.store(position, std::memory_order_seq_cst);
    if (s->waiters.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(s->mutex);
      s->work_done.notify_all();
    }
  }
  {
    DeviceStreams& d = device_streams(s->device);
    std::lock_guard<std::mutex> lock(d.mutex);
    d.streams.erase(std::find(d.streams.begin(), d.streams.end(), s));
  }
  release(s); // the worker's reference
}

// Creates a stream and its worker. Caller holds the device's mutex.
Stream* create_stream(int device, int priority, bool is_default) {
  static std::atomic<uint32_t> next_id{1};
  auto* s = new Stream();
  s->id = next_id.fetch_add(1, std::memory_order_relaxed);
  s->device = device;
  s->priority = priority;
  s->is_default = is_default;
  s->handle = add_handle<fooStream_t>(HandleKind::Stream, s);
  retain(s); // one reference for the worker, one for the owner
  device_streams(device).streams.push_back(s);
  std::thread(&worker_main, s).detach();
  return s;
}

// The live streams of `device`, each retained.
std::vector<Stream*> retained_streams(int device) {
  DeviceStreams& d = device_streams(device);
  std::lock_guard<std::mutex> lock(d.mutex);
  for (Stream* s : d.streams) {
    retain(s);
  }
  return d.streams;
}

fooError_t unknown_stream(fooStream_t handle) {
  return runtime::fail(fooErrorInvalidResourceHandle, "unknown stream %p", static_cast<void*>(handle));
}

fooError_t own_stream() {
  return runtime::fail(fooErrorNotPermitted, "work running on a stream cannot wait for that stream");
}

} // namespace

bool run_work(Stream* s, const Task& task) {
  switch (task.kind) {
    case Task::Kind::Kernel: {
      std::string message;
      if (!run_kernel(task, &message)) {
        std::lock_guard<std::mutex> lock(s->mutex);
        if (!s->failed.exchange(true)) {
          s->failure = std::move(message);
        }
        return false;
      }
      return true;
    }
    case Task::Kind::HostFunc: task.host_fn(task.dst); return true;
    case Task::Kind::Copy:
    case Task::Kind::Fill: run_transfer(task); return true;
    case Task::Kind::Graph: return run_graph(s, task.graph);
    case Task::Kind::Native: task.native_fn(nullptr, task.params_data()); return true;
    case Task::Kind::Record:
    case Task::Kind::Wait: break;
  }
  return true;
}

// Drops a task without running it, releasing what it holds.
void discard(Task& task) {
  switch (task.kind) {
    case Task::Kind::Kernel:
    case Task::Kind::Native: discard_params(task); break;
    case Task::Kind::Record: release(task.event); break;
    case Task::Kind::Wait: release(task.other); break;
    case Task::Kind::Graph:
      release(task.graph);
      task.graph = nullptr;
      break;
    case Task::Kind::HostFunc:
    case Task::Kind::Copy:
    case Task::Kind::Fill: break;
  }
}

bool run_graph(Stream* s, const GraphExec* exec) {
  const std::lock_guard<std::mutex> one_launch_at_a_time(exec->running);
  for (const Task& task : exec->nodes) {
    if (!run_work(s, task)) {
      return false; // the stream holds the failure; the rest of the graph does not run
    }
  }
  return true;
}

void release(GraphExec* exec) {
  if (exec->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    for (Task& task : exec->nodes) {
      discard(task);
    }
    delete exec;
  }
}

Capture* capturing(const Stream* stream) {
  return stream->capture.load(std::memory_order_acquire);
}

void set_capturing(Stream* stream, Capture* capture) {
  stream->capture.store(capture, std::memory_order_release);
}

Stream* worker_stream() {
  return current_worker;
}

WorkerScope::WorkerScope(Stream* stream) : previous_(current_worker) {
  current_worker = stream;
}

WorkerScope::~WorkerScope() {
  current_worker = previous_;
}

Stream* stream_from_handle(fooStream_t handle) {
  return find_handle<Stream>(HandleKind::Stream, handle);
}

int stream_device_of(const Stream* stream) {
  return stream->device;
}

uint32_t stream_trace_id_of(const Stream* stream) {
  return stream->id;
}

uint32_t stream_trace_flags_of(const Stream* stream) {
  return stream->is_default ? fooActivityFlagDefaultStream : 0;
}

uint64_t enqueue(Stream* s, Task&& task, const tracing::Tag* tag, void (*on_position)(void*, uint64_t), void* context) {
  if (Capture* capture = capturing(s); __builtin_expect(capture != nullptr, 0)) { // recorded, not run
    capture_task(capture, s, std::move(task));
    return 0;
  }
  std::unique_lock<std::mutex> lock(s->mutex);
  const auto has_room = [&] {
    return s->tail.load(std::memory_order_relaxed) - s->done.load(std::memory_order_seq_cst) < kQueueCapacity;
  };
  if (!has_room()) {
    s->waiters.fetch_add(1);
    s->work_done.wait(lock, has_room);
    s->waiters.fetch_sub(1);
  }
  const uint64_t position = s->tail.load(std::memory_order_relaxed) + 1;
  if (tag != nullptr) { // [tracing]
    if (!s->tags) {
      s->tags = std::make_unique<tracing::Tag[]>(kQueueCapacity);
    }
    s->tags[(position - 1) % kQueueCapacity] = *tag;
    task.traced = true;
  }
  s->queue[(position - 1) % kQueueCapacity] = std::move(task);
  if (on_position != nullptr) {
    on_position(context, position);
  }
  s->tail.store(position, std::memory_order_release);
  const bool wake = s->worker_sleeping;
  lock.unlock();
  if (wake) {
    s->work_ready.notify_one();
  }
  return position;
}

uint64_t stream_tail(const Stream* stream) {
  return stream->tail.load(std::memory_order_acquire);
}

// Sequentially consistent, as the worker's store: a waiter registers in `waiters`, then reads `done`
// (the other half of the pattern in worker_main). On x86 this load costs what an acquire load does.
bool reached(const Stream* stream, uint64_t position) {
  return stream->done.load(std::memory_order_seq_cst) >= position;
}

void wait_for(Stream* s, uint64_t position) {
  const auto done = [&] { return reached(s, position); };
  if (spin_until(done, kHostSpin)) {
    return;
  }
  std::unique_lock<std::mutex> lock(s->mutex);
  s->waiters.fetch_add(1);
  s->work_done.wait(lock, done);
  s->waiters.fetch_sub(1);
}

void retain(Stream* s) {
  s->refs.fetch_add(1, std::memory_order_relaxed);
}

void release(Stream* s) {
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete s;
  }
}

fooError_t take_error(Stream* s) {
  if (!s->failed.load(std::memory_order_acquire)) {
    return fooSuccess;
  }
  std::string message;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (!s->failed.exchange(false)) {
      return fooSuccess; // another thread took it
    }
    message = std::move(s->failure);
  }
  return runtime::fail(fooErrorLaunchFailure, "%s (device %d)", message.c_str(), s->device);
}

void stop_workers() {
  stopped.store(true, std::memory_order_release);
}

void wait_all_devices() {
  for (int device = 0; device < config().device_count; ++device) {
    for (Stream* s : retained_streams(device)) {
      if (s != current_worker) {
        wait_for(s, stream_tail(s));
      }
      release(s);
    }
  }
}

} // namespace torch_foo::emulated

namespace torch_foo::driver {

using namespace emulated;

fooStream_t default_stream(int device) {
  DeviceStreams& d = device_streams(device);
  Stream* s = d.default_stream.load(std::memory_order_acquire);
  if (s == nullptr) {
    std::lock_guard<std::mutex> lock(d.mutex);
    s = d.default_stream.load(std::memory_order_relaxed);
    if (s == nullptr) {
      s = create_stream(device, kLeastPriority, true);
      d.default_stream.store(s, std::memory_order_release);
    }
  }
  return s->handle;
}

fooError_t stream_create(int device, int priority, fooStream_t* stream) {
  priority = std::clamp(priority, kGreatestPriority, kLeastPriority); // as CUDA does
  DeviceStreams& d = device_streams(device);
  std::lock_guard<std::mutex> lock(d.mutex);
  *stream = create_stream(device, priority, false)->handle;
  return fooSuccess;
}

fooError_t stream_destroy(fooStream_t handle) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_stream(handle);
  }
  if (s->is_default) {
    return runtime::fail(fooErrorInvalidResourceHandle, "the default stream of a device cannot be destroyed");
  }
  if (const auto conflict = stream_capture_conflict(s, "destroying a capturing stream"); conflict != fooSuccess) {
    return conflict;
  }
  if (remove_handle<Stream>(HandleKind::Stream, handle) == nullptr) {
    return unknown_stream(handle); // another thread destroyed it meanwhile
  }
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->stopping = true;
  }
  s->work_ready.notify_one();
  release(s); // the owner's reference; the worker drops its own when it exits
  return fooSuccess;
}

fooError_t stream_query(fooStream_t handle) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_stream(handle);
  }
  if (const auto conflict = stream_capture_conflict(s, "fooStreamQuery"); conflict != fooSuccess) {
    return conflict;
  }
  if (!reached(s, stream_tail(s))) {
    return fooErrorNotReady;
  }
  return take_error(s);
}

fooError_t stream_synchronize(fooStream_t handle) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_stream(handle);
  }
  if (s == current_worker) {
    return own_stream();
  }
  if (const auto conflict = stream_capture_conflict(s, "fooStreamSynchronize"); conflict != fooSuccess) {
    return conflict;
  }
  const tracing::SyncScope trace(fooSynchronizationStream, s->device, s->id); // [tracing]
  wait_for(s, stream_tail(s));
  return take_error(s);
}

fooError_t stream_priority(fooStream_t handle, int* priority) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_stream(handle);
  }
  *priority = s->priority;
  return fooSuccess;
}

fooError_t stream_device(fooStream_t handle, int* device) {
  const Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_stream(handle);
  }
  *device = s->device;
  return fooSuccess;
}

fooError_t device_synchronize(int device) {
  if (current_worker != nullptr && current_worker->device == device) {
    return own_stream();
  }
  if (const auto conflict = device_capture_conflict(device, "fooDeviceSynchronize"); conflict != fooSuccess) {
    return conflict;
  }
  const tracing::SyncScope trace(fooSynchronizationDevice, device, 0); // [tracing]
  fooError_t result = fooSuccess;
  for (Stream* s : retained_streams(device)) {
    wait_for(s, stream_tail(s));
    const fooError_t error = take_error(s);
    if (result == fooSuccess) {
      result = error;
    }
    release(s);
  }
  return result;
}

fooError_t launch_host_func(fooStream_t handle, fooHostFn_t fn, void* user_data) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_stream(handle);
  }
  if (const auto err = capture_check(s); err != fooSuccess) {
    return err;
  }
  Task task;
  task.kind = Task::Kind::HostFunc;
  task.host_fn = fn;
  task.dst = user_data;
  enqueue(s, std::move(task));
  return fooSuccess;
}

fooError_t stream_trace_id(fooStream_t handle, uint32_t* id) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_stream(handle);
  }
  *id = s->id;
  return fooSuccess;
}

} // namespace torch_foo::driver

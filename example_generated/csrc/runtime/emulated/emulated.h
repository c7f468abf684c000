// Internals of the emulated foo device, shared by the files of csrc/runtime/emulated/.
//
// The emulation in one paragraph. Devices are regions of one reserved range of the host's address
// space (memory.cpp); in strict memory mode that range is never accessible and the runtime reaches
// the same pages through a second, private range. Each stream has a worker thread that runs its tasks
// (kernels, native work, host functions, copies, fills, event records, waits for other streams,
// executable graphs) in order from a bounded queue (streams.cpp); a capturing stream records its
// tasks instead (capture.cpp), and an executable graph runs the recorded ones as one task; a
// kernel's blocks run on the worker's OpenMP team (kernels.cpp). Positions in a stream are task
// counts: an event is a (stream, position) pair, complete once the stream has finished that many
// tasks (events.cpp). Configuration comes from the environment (config.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../driver.h"
#include "../emulation.h"
#include "../tracing_records.h"

namespace torch_foo::emulated {

// ---- configuration (config.cpp) -----------------------------------------------------------------

struct Config {
  int device_count = 2;
  size_t capacity = size_t{8} << 30; // bytes per device
  bool strict = false; // device memory is not host-addressable
};

// Read from FOO_DEVICE_COUNT, FOO_DEVICE_MEMORY and FOO_STRICT_MEMORY once, when first needed.
const Config& config();

// ---- memory (memory.cpp) ------------------------------------------------------------------------

// Whether [ptr, ptr + count) lies inside one live allocation of device memory.
bool is_device_range(const void* ptr, size_t count);
// Whether [ptr, ptr + count) overlaps the device address range at all.
bool overlaps_device_memory(const void* ptr, size_t count);
// The address at which the runtime (and kernels) reach device memory `ptr`; others unchanged.
void* runtime_address(const void* ptr);
// Whether [ptr, ptr + count) lies inside one pinned host allocation.
bool is_pinned(const void* ptr, size_t count);
// Reserves the device address range (once, from driver::initialize()).
void initialize_memory();

// ---- streams (streams.cpp) ----------------------------------------------------------------------

struct Stream;
struct Event;
struct Function;
struct Capture;
struct GraphExec;

constexpr size_t kInlineParams = 320; // parameter blocks up to this size travel inside the task

struct Task {
  enum class Kind : uint8_t { Kernel, HostFunc, Copy, Fill, Record, Wait, Graph, Native };
  Kind kind = Kind::Kernel;
  bool traced = false; // [tracing] its tag waits beside it in the stream (it fits the padding after kind)
  int value = 0; // Fill: the byte
  void* dst = nullptr; // Copy, Fill: the destination; HostFunc: its user data
  const void* src = nullptr; // Copy: the source
  size_t count = 0; // Copy, Fill: bytes
  Function* function = nullptr; // Kernel
  fooHostFn_t host_fn = nullptr; // HostFunc
  fooNativeFn_t native_fn = nullptr; // Native: called with its arguments (the parameter block)
  const char* name = nullptr; // Native: its name (interned, see intern())
  fooDim3 grid{1, 1, 1};
  fooDim3 block{1, 1, 1};
  uint32_t shared_bytes = 0;
  uint32_t params_size = 0; // Kernel: the parameter block; Native: the copied arguments
  unsigned char* params_heap = nullptr; // a larger parameter block (owned by the task)
  uint64_t fault = 0; // Kernel: the launch's number if fault injection makes it fail (faults.cpp)
  Event* event = nullptr; // Record: the timing event to stamp (holds a reference)
  Stream* other = nullptr; // Wait: the stream to wait for (holds a reference) ...
  uint64_t position = 0; // ... until it has finished this many tasks
  GraphExec* graph = nullptr; // Graph: the executable graph to run (holds a reference)
  alignas(16) unsigned char params[kInlineParams];

  const void* params_data() const {
    return params_heap != nullptr ? params_heap : params;
  }
};

// An executable graph: tasks that run one after the other as ONE task of a stream (Kind::Graph),
// so that a launch costs the host one enqueue whatever its size; driver::graph_instantiate()
// makes them from a captured graph. Reference counted: its handle and each pending launch hold one.
// Launches run one at a time (runtime.h): a launch on another stream waits for `running` while one
// runs, since host functions of the graph may keep state between replays (the CPU fallback's staging).
struct GraphExec {
  int device = 0;
  std::atomic<int> refs{1};
  std::vector<Task> nodes;
  mutable std::mutex running;
};

// The stream whose worker is the calling thread (null on host threads).
Stream* worker_stream();
// Makes the calling thread count as `stream`'s worker while it runs blocks of that stream's kernel.
class WorkerScope {
 public:
  explicit WorkerScope(Stream* stream);
  ~WorkerScope();
  WorkerScope(const WorkerScope&) = delete;
  WorkerScope& operator=(const WorkerScope&) = delete;

 private:
  Stream* previous_;
};
// Resolves a handle (never null here): the stream, or null for an unknown handle.
Stream* stream_from_handle(fooStream_t handle);
int stream_device_of(const Stream* stream);
// [tracing] The id tracing records give the stream, and their flags (fooActivityFlagDefaultStream).
uint32_t stream_trace_id_of(const Stream* stream);
uint32_t stream_trace_flags_of(const Stream* stream);
// [tracing] The tag of work of `kind` enqueued on `stream` now (null while it is not traced).
inline const tracing::Tag* trace_tag(const Stream* stream, fooActivityKind kind, const char* name, int detail = 0) {
  return tracing::any_enabled() ? tracing::make_tag(kind, name, stream_device_of(stream), detail) : nullptr;
}
// [tracing] Records a host thread's wait for `stream` while it lives (nothing while it is not traced).
class StreamWaitTrace {
 public:
  StreamWaitTrace(fooSynchronizationKind kind, const Stream* stream) {
    if (tracing::any_enabled()) {
      scope_.emplace(kind, stream_device_of(stream), stream_trace_id_of(stream));
    }
  }

 private:
  std::optional<tracing::SyncScope> scope_;
};
// Appends a task (taking ownership of what it references); the stream runs it after the earlier ones.
// Returns its position; on_position(context, position), if given, runs before the worker can see it.
// A task with a `tag` (trace_tag) gets a device record when it has run.
uint64_t enqueue(
    Stream* stream,
    Task&& task,
    const tracing::Tag* tag = nullptr,
    void (*on_position)(void*, uint64_t) = nullptr,
    void* context = nullptr);
// The position of the last task enqueued so far.
uint64_t stream_tail(const Stream* stream);
// Blocks until `stream` has finished `position` tasks.
void wait_for(Stream* stream, uint64_t position);
// True once `stream` has finished `position` tasks.
bool reached(const Stream* stream, uint64_t position);
void retain(Stream* stream);
void release(Stream* stream);
// Takes the failure a kernel left on `stream` (fooSuccess if none), describing it with fail().
fooError_t take_error(Stream* stream);
// Waits for all work on all devices without consuming failures (free(), module unload, exit).
void wait_all_devices();
// From now on workers discard their tasks instead of running them (process exit, streams.cpp).
void stop_workers();

// Runs a copy or fill task on a stream worker.
void run_transfer(const Task& task);
// Runs a kernel, host function, copy, fill or graph task on `stream`'s worker, keeping what it owns;
// false if a kernel failed (the stream then holds the failure).
bool run_work(Stream* stream, const Task& task);
// Frees what a task owns without running it.
void discard(Task& task);

// Runs an executable graph's work on the calling worker of `stream`; false if a kernel failed.
bool run_graph(Stream* stream, const GraphExec* exec);
void release(GraphExec* exec);

// ---- stream capture (capture.cpp) ---------------------------------------------------------------

// The capture `stream` records into, or null (one atomic load: every submission asks).
Capture* capturing(const Stream* stream);
void set_capturing(Stream* stream, Capture* capture);
// Records a task submitted to a stream that captures into `capture` (enqueue() calls it).
void capture_task(Capture* capture, Stream* stream, Task&& task);
// fooErrorStreamCaptureInvalidated (described) if `stream` captures into an invalidated capture.
fooError_t capture_check(Stream* stream);
// `call` conflicts with the capture of `stream` / of a stream of `device` / with capture `id` (an
// event recorded in it) if that capture is active: invalidates it, fails with
// fooErrorStreamCaptureUnsupported; fooSuccess otherwise.
fooError_t stream_capture_conflict(
    Stream* stream, const char* call, fooError_t code = fooErrorStreamCaptureUnsupported);
fooError_t device_capture_conflict(int device, const char* call);
fooError_t event_capture_conflict(uint64_t id, const char* call);
// An event recorded on capturing `stream`: the capture's id and the stream's last recorded node.
void capture_record(Stream* stream, uint64_t* id, int64_t* node);
// `stream` waits for an event recorded in capture `id` after `node` of stream `from`: joins the
// capture, or records the dependency. fooSuccess at once if that capture has ended.
fooError_t capture_wait(Stream* stream, uint64_t id, const Stream* from, int64_t node);

// What a capture recorded: its tasks in the order they were submitted (a valid order to run them
// in: every dependency points to an earlier task) and, for each, what the dot dump shows.
struct CapturedNode {
  uint32_t stream = 0; // the trace id of the stream it was submitted to
  std::string label;
  std::vector<int64_t> deps; // earlier nodes it depends on
};
struct CapturedWork {
  int device = 0;
  std::vector<Task> nodes;
  std::vector<CapturedNode> info;
};
// Ends the capture that began on `stream` (its streams work normally again) and hands over its
// work; fails (described) if `stream` does not capture, is not where the capture began, or the
// capture was invalidated or not joined back (its work is then discarded).
fooError_t end_capture(Stream* stream, CapturedWork* work);

// ---- device activity ----------------------------------------------------------------------------

// The kinds of work the utilisation metrics measure: kernels and graphs (compute), copies and fills (memory).
enum class Activity : uint8_t { Compute, Memory };
// Told when a stream worker of `device` starts (starts) or finishes (!starts) a task of that kind, and
// around a synchronous copy. Null unless the device's monitoring is built in (it sets the hook as
// the program starts): the stream workers then pay one load and a branch not taken per task.
extern void (*activity_hook)(int device, Activity activity, bool starts);

// ---- events (events.cpp) ------------------------------------------------------------------------

// Stamps a timing event when its stream's worker reaches the record at `position`.
void stamp_event(Event* event, Stream* stream, uint64_t position);
void release(Event* event);

// ---- kernels (kernels.cpp) ----------------------------------------------------------------------

constexpr int kMaxThreadsPerBlock = 1024;
constexpr size_t kSharedMemPerBlock = size_t{48} << 10;

// Runs a kernel task's grid on the calling worker thread; false (with `message`) if it failed.
bool run_kernel(const Task& task, std::string* message);
// Copies `size` bytes into the task's parameter block (inline when they fit, else on the heap).
void store_params(Task& task, const void* data, size_t size);
// Frees what a kernel or native task owns.
void discard_params(Task& task);
// A copy of `text` that lives as long as the process, one per distinct text: what a task keeps of
// an ErrorFlag's message or a native launch's name (which the caller may free once it returns).
const char* intern(const char* text);
// The name a kernel was created or looked up with.
const char* kernel_name(const Function* function);

// ---- fault injection (faults.cpp) ---------------------------------------------------------------

// The kinds of operation FOO_FAULTS can make fail.
enum class Fault : uint8_t { Malloc, Memcpy, Kernel, Event };
// Counts one operation of `kind`; returns its number (from 1) if FOO_FAULTS makes it fail, else 0.
uint64_t injected_fault(Fault kind);
// Counts one operation of `kind`; if it is to fail, describes the failure with fail() and returns `code`.
fooError_t inject(Fault kind, fooError_t code);
// The message of the injected failure of operation `n` of `kind`.
std::string fault_message(Fault kind, uint64_t n);

// ---- shared helpers -----------------------------------------------------------------------------

inline size_t round_up(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace torch_foo::emulated

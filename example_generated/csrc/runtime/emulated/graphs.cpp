// Graphs of the emulated foo device: stream capture records tasks instead of running them.
//
// A capture starts on one stream (its origin). enqueue() hands every task submitted to a capturing
// stream to capture_task(), which appends it to the capture's node list with its dependencies: the
// previous node of the same stream, and the nodes other streams had reached when they recorded the
// events this stream waited for. An event recorded on a capturing stream enqueues nothing: it
// remembers (capture, stream, last node), and a stream that waits for it joins the capture. Since
// every dependency points to a node recorded earlier, the recording order is a valid order to run
// them in: an executable graph (GraphExec) runs its nodes one after the other, as ONE task of the
// stream it is launched on, so a launch costs the host one enqueue whatever the graph's size. The
// dependencies are kept for the dot dump (fooGraphDebugDotPrint) and the join check.
//
// Captures, graphs and executable graphs are guarded by one mutex: it is taken only while some
// stream captures (enqueue() reads the stream's capture pointer first) and by graph calls.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

#include "../internal.h"
#include "emulated.h"
#include "handles.h"

namespace torch_foo::emulated {
namespace {

struct NodeInfo {
  uint32_t stream = 0; // the trace id of the stream it was submitted to
  std::string label;
  std::vector<int64_t> deps; // earlier nodes it depends on
};

} // namespace

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
  std::vector<NodeInfo> info;
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

struct Graph {
  int device = 0;
  std::vector<Task> nodes;
  std::vector<NodeInfo> info;
};

struct GraphExec {
  int device = 0;
  std::atomic<int> refs{1};
  std::vector<Task> nodes;
};

namespace {

std::mutex& graph_mutex() {
  static auto* mutex = new std::mutex(); // never destroyed: workers may release graphs at exit
  return *mutex;
}

std::vector<Capture*>& active_captures() { // guarded by graph_mutex()
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

Capture* find_capture(uint64_t id) { // caller holds graph_mutex()
  for (Capture* c : active_captures()) {
    if (c->id == id) {
      return c;
    }
  }
  return nullptr;
}

void invalidate_capture(Capture* c, const std::string& reason) { // caller holds graph_mutex()
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

// Ends capture `c`: its streams work normally again. Caller holds graph_mutex(); deletes `c`.
void end_capture(Capture* c) {
  for (Capture::Member& m : c->members) {
    set_capturing(m.stream, nullptr);
    release(m.stream);
  }
  auto& active = active_captures();
  active.erase(std::find(active.begin(), active.end(), c));
  active_count.store(static_cast<int>(active.size()), std::memory_order_release);
}

void discard_nodes(std::vector<Task>& nodes) {
  for (Task& task : nodes) {
    discard(task);
  }
  nodes.clear();
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
    case Task::Kind::Graph: return "graph";
    case Task::Kind::Record:
    case Task::Kind::Wait: break;
  }
  return "?";
}

// A copy of `task` that owns its own parameter block (and a reference to a nested graph).
Task copy_node(const Task& task) {
  Task copy = task;
  copy.traced = false;
  if (task.kind == Task::Kind::Kernel && task.params_heap != nullptr) {
    copy.params_heap = static_cast<unsigned char*>(::operator new[](task.params_size, std::align_val_t{16}));
    std::memcpy(copy.params_heap, task.params_heap, task.params_size);
  }
  if (task.kind == Task::Kind::Graph) {
    task.graph->refs.fetch_add(1, std::memory_order_relaxed);
  }
  return copy;
}

Graph* graph_from_handle(fooGraph_t handle) {
  return find_handle<Graph>(HandleKind::Graph, handle);
}

GraphExec* exec_from_handle(fooGraphExec_t handle) {
  return find_handle<GraphExec>(HandleKind::GraphExec, handle);
}

fooError_t unknown_graph(const void* handle) {
  return runtime::fail(fooErrorInvalidResourceHandle, "unknown graph %p", handle);
}

fooError_t unknown_graph_stream(fooStream_t handle) {
  return runtime::fail(fooErrorInvalidResourceHandle, "unknown stream %p", static_cast<void*>(handle));
}

} // namespace

void capture_task(Capture* c, Stream* s, Task&& task) {
  std::lock_guard<std::mutex> lock(graph_mutex());
  Capture::Member* m = c->member(s);
  if (c->invalidated || m == nullptr) { // submitted while another thread invalidated it: dropped
    discard(task);
    return;
  }
  const auto index = static_cast<int64_t>(c->nodes.size());
  NodeInfo info;
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

fooError_t capture_check(Stream* s) {
  if (capturing(s) == nullptr) {
    return fooSuccess;
  }
  std::lock_guard<std::mutex> lock(graph_mutex());
  Capture* c = capturing(s);
  if (c == nullptr || !c->invalidated) {
    return fooSuccess;
  }
  return runtime::fail(
      fooErrorStreamCaptureInvalidated,
      "the capture this stream records into was invalidated by %s",
      c->reason.c_str());
}

fooError_t stream_capture_conflict(Stream* s, const char* call, fooError_t code) {
  if (capturing(s) == nullptr) {
    return fooSuccess;
  }
  std::lock_guard<std::mutex> lock(graph_mutex());
  Capture* c = capturing(s);
  return c == nullptr ? fooSuccess : capture_conflict(c, call, code);
}

fooError_t device_capture_conflict(int device, const char* call) {
  if (active_count.load(std::memory_order_acquire) == 0) {
    return fooSuccess;
  }
  std::lock_guard<std::mutex> lock(graph_mutex());
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

fooError_t event_capture_conflict(uint64_t id, const char* call) {
  if (id == 0) {
    return fooSuccess;
  }
  std::lock_guard<std::mutex> lock(graph_mutex());
  Capture* c = find_capture(id);
  const std::string what = std::string(call) + " of an event recorded in the capture";
  return c == nullptr ? fooSuccess : capture_conflict(c, what.c_str(), fooErrorStreamCaptureUnsupported);
}

void capture_record(Stream* s, uint64_t* id, int64_t* node) {
  std::lock_guard<std::mutex> lock(graph_mutex());
  Capture* c = capturing(s);
  Capture::Member* m = c != nullptr ? c->member(s) : nullptr;
  *id = c != nullptr ? c->id : 0;
  *node = m != nullptr ? m->last_node : -1;
}

fooError_t capture_wait(Stream* s, uint64_t id, const Stream* from, int64_t node) {
  std::lock_guard<std::mutex> lock(graph_mutex());
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

bool run_graph(Stream* s, const GraphExec* exec) {
  for (const Task& task : exec->nodes) {
    if (!run_work(s, task)) {
      return false; // the stream holds the failure; the rest of the graph does not run
    }
  }
  return true;
}

void release(GraphExec* exec) {
  if (exec->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    discard_nodes(exec->nodes);
    delete exec;
  }
}

} // namespace torch_foo::emulated

namespace torch_foo::driver {

using namespace emulated;

fooError_t stream_begin_capture(fooStream_t handle, fooStreamCaptureMode mode) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_graph_stream(handle);
  }
  static std::atomic<uint64_t> next_id{1};
  std::lock_guard<std::mutex> lock(graph_mutex());
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

fooError_t stream_end_capture(fooStream_t handle, fooGraph_t* graph) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_graph_stream(handle);
  }
  std::unique_ptr<Capture> c;
  {
    std::lock_guard<std::mutex> lock(graph_mutex());
    Capture* current = capturing(s);
    if (current == nullptr) {
      return runtime::fail(fooErrorInvalidValue, "the stream does not capture");
    }
    if (current->origin != s) {
      const char* message = "the capture must end on the stream it began on, not on one that joined it";
      return runtime::fail(fooErrorStreamCaptureUnjoined, "%s", message);
    }
    end_capture(current);
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
    discard_nodes(c->nodes);
    return error;
  }
  auto* g = new Graph();
  g->device = c->device;
  g->nodes = std::move(c->nodes);
  g->info = std::move(c->info);
  *graph = add_handle<fooGraph_t>(HandleKind::Graph, g);
  return fooSuccess;
}

fooError_t stream_capture_info(fooStream_t handle, fooStreamCaptureStatus* status, unsigned long long* id) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_graph_stream(handle);
  }
  *status = fooStreamCaptureStatusNone;
  *id = 0;
  if (capturing(s) == nullptr) {
    return fooSuccess;
  }
  std::lock_guard<std::mutex> lock(graph_mutex());
  if (const Capture* c = capturing(s); c != nullptr) {
    *status = c->invalidated ? fooStreamCaptureStatusInvalidated : fooStreamCaptureStatusActive;
    *id = c->id;
  }
  return fooSuccess;
}

// The "potentially unsafe" calls: prohibited on a thread with a capture that is not relaxed, and on
// every thread while a global capture runs (CUDA's cudaStreamCaptureMode).
fooError_t capture_permits_unsafe_call(const char* call) {
  if (active_count.load(std::memory_order_acquire) == 0) {
    return fooSuccess;
  }
  std::lock_guard<std::mutex> lock(graph_mutex());
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

fooError_t graph_node_count(fooGraph_t handle, size_t* count) {
  std::lock_guard<std::mutex> lock(graph_mutex());
  const Graph* g = graph_from_handle(handle);
  if (g == nullptr) {
    return unknown_graph(handle);
  }
  *count = g->nodes.size();
  return fooSuccess;
}

fooError_t graph_instantiate(fooGraph_t handle, fooGraphExec_t* exec) {
  std::lock_guard<std::mutex> lock(graph_mutex());
  const Graph* g = graph_from_handle(handle);
  if (g == nullptr) {
    return unknown_graph(handle);
  }
  auto* e = new GraphExec();
  e->device = g->device;
  e->nodes.reserve(g->nodes.size());
  for (const Task& task : g->nodes) {
    e->nodes.push_back(copy_node(task));
  }
  *exec = add_handle<fooGraphExec_t>(HandleKind::GraphExec, e);
  return fooSuccess;
}

fooError_t graph_launch(fooGraphExec_t handle, fooStream_t stream) {
  Stream* s = stream_from_handle(stream);
  if (s == nullptr) {
    return unknown_graph_stream(stream);
  }
  GraphExec* e = exec_from_handle(handle);
  if (e == nullptr) {
    return unknown_graph(handle);
  }
  if (e->device != stream_device_of(s)) {
    return runtime::fail(
        fooErrorInvalidValue,
        "a graph of device %d cannot be launched on a stream of device %d",
        e->device,
        stream_device_of(s));
  }
  if (const auto err = capture_check(s); err != fooSuccess) {
    return err;
  }
  Task task;
  task.kind = Task::Kind::Graph;
  task.graph = e;
  e->refs.fetch_add(1, std::memory_order_relaxed);
  enqueue(s, std::move(task), trace_tag(s, fooActivityKindKernel, "fooGraphLaunch"));
  return fooSuccess;
}

fooError_t graph_destroy(fooGraph_t handle) {
  std::unique_ptr<Graph> g;
  {
    std::lock_guard<std::mutex> lock(graph_mutex()); // no other graph call still reads it
    g.reset(remove_handle<Graph>(HandleKind::Graph, handle));
    if (g == nullptr) {
      return unknown_graph(handle);
    }
  }
  discard_nodes(g->nodes);
  return fooSuccess;
}

fooError_t graph_exec_destroy(fooGraphExec_t handle) {
  GraphExec* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(graph_mutex());
    e = remove_handle<GraphExec>(HandleKind::GraphExec, handle);
    if (e == nullptr) {
      return unknown_graph(handle);
    }
  }
  release(e); // pending launches hold their own references
  return fooSuccess;
}

fooError_t graph_debug_dot_print(fooGraph_t handle, const char* path) {
  std::lock_guard<std::mutex> lock(graph_mutex());
  const Graph* g = graph_from_handle(handle);
  if (g == nullptr) {
    return unknown_graph(handle);
  }
  FILE* out = std::fopen(path, "w");
  if (out == nullptr) {
    return runtime::fail(fooErrorInvalidValue, "cannot write %s", path);
  }
  std::fprintf(out, "digraph fooGraph {\n  label=\"foo graph, device %d\";\n", g->device);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const NodeInfo& info = g->info[i];
    std::fprintf(out, "  n%zu [shape=box, label=\"%zu: %s\\nstream %u\"];\n", i, i, info.label.c_str(), info.stream);
    for (const int64_t dep : info.deps) {
      std::fprintf(out, "  n%lld -> n%zu;\n", static_cast<long long>(dep), i);
    }
  }
  std::fprintf(out, "}\n");
  const bool ok = std::fclose(out) == 0;
  return ok ? fooSuccess : runtime::fail(fooErrorInvalidValue, "cannot write %s", path);
}

} // namespace torch_foo::driver

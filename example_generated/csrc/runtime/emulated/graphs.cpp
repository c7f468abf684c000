// Graphs of the emulated foo device: the graph a capture (capture.cpp) recorded, and executable
// graphs made from it.
//
// A graph keeps the captured nodes in the order they were recorded, which is a valid order to run
// them in; an executable graph (GraphExec, emulated.h) runs them one after the other as ONE task of
// the stream it is launched on, so a launch costs the host one enqueue whatever the graph's size.
// The dependencies are kept for the dot dump (fooGraphDebugDotPrint).
//
// Graphs and the handles of executable graphs are guarded by one mutex, taken by the graph calls only.
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

#include "../internal.h"
#include "emulated.h"
#include "handles.h"

namespace torch_foo::emulated {

struct Graph {
  int device = 0;
  std::vector<Task> nodes;
  std::vector<CapturedNode> info;
};

namespace {

std::mutex& graph_mutex() {
  static auto* mutex = new std::mutex(); // never destroyed: workers may release graphs at exit
  return *mutex;
}

void discard_nodes(std::vector<Task>& nodes) {
  for (Task& task : nodes) {
    discard(task);
  }
  nodes.clear();
}

// A copy of `task` that owns its own parameter block (and a reference to a nested graph).
Task copy_node(const Task& task) {
  Task copy = task;
  copy.traced = false;
  if ((task.kind == Task::Kind::Kernel || task.kind == Task::Kind::Native) && task.params_heap != nullptr) {
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

} // namespace torch_foo::emulated

namespace torch_foo::driver {

using namespace emulated;

fooError_t stream_end_capture(fooStream_t handle, fooGraph_t* graph) {
  Stream* s = stream_from_handle(handle);
  if (s == nullptr) {
    return unknown_graph_stream(handle);
  }
  CapturedWork work;
  if (const auto err = end_capture(s, &work); err != fooSuccess) {
    return err;
  }
  auto* g = new Graph();
  g->device = work.device;
  g->nodes = std::move(work.nodes);
  g->info = std::move(work.info);
  *graph = add_handle<fooGraph_t>(HandleKind::Graph, g);
  return fooSuccess;
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
    const CapturedNode& info = g->info[i];
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

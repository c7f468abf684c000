// torch.accelerator.Graph for the foo device: at::GraphImplInterface over the runtime's stream
// capture, registered for PrivateUse1 under the name PyTorch looks it up by
// (c10::DeviceTypeName(PrivateUse1, /*lowercase=*/false): the backend's name upper-cased).
//
// capture_begin(pool, mode) starts capturing the current stream and routes the allocations of the
// capture's streams to a graph-private memory pool (DeviceAllocator.h): `pool`, shared with the
// graphs that pass the same id, or a new one. capture_end() ends the capture and, unless the graph
// was made with keep_graph=True, instantiates it and drops the captured graph at once (as CUDA's
// CUDAGraph does); replay() launches it on the current stream as one submission. reset() releases
// everything and the pool's use. Random operators cannot be captured: their kernels take the
// generator's seed and offset by value, which a replay would repeat (docs/graphs.md).
//
// Work that other layers record into a capture may own memory its host functions use at every replay
// (the CPU fallback's pinned staging and captured arguments, csrc/aten/FallbackCapture.cpp): the
// graph keeps it (keep_alive) until reset() and frees it once the last launch has finished, which an
// event recorded after each launch tells. Launches of one executable graph run one at a time
// (runtime.h), so such memory is never used by two replays at once.
#include "Graph.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/core/GraphImplInterface.h>
#include <c10/core/DeviceGuard.h>

#include "../runtime/runtime.h"
#include "DeviceAllocator.h"
#include "Exception.h"
#include "Stream.h"

namespace torch_foo {
namespace {

std::atomic<int> captures_underway{0}; // graphs between capture_begin and capture_end, in this process

class FooGraph;

// The graphs between capture_begin and capture_end, by capture id (keep_alive finds them here).
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex(); // never destroyed: graphs may be reset at exit
  return *mutex;
}

std::unordered_map<unsigned long long, FooGraph*>& capturing_graphs() { // guarded by registry_mutex()
  static auto* graphs = new std::unordered_map<unsigned long long, FooGraph*>();
  return *graphs;
}

// The first failure of recorded work since the last replay() (report_replay_error).
std::mutex replay_error_mutex;
std::string replay_error; // guarded by replay_error_mutex
std::atomic<bool> replay_failed{false};

void raise_replay_error() {
  std::string message;
  {
    const std::lock_guard<std::mutex> lock(replay_error_mutex);
    message = std::move(replay_error);
    replay_error.clear();
    replay_failed.store(false, std::memory_order_release);
  }
  TORCH_CHECK(false, "an earlier replay of a foo graph failed, and its outputs hold no valid values: ", message);
}

// Whether `stream` records into the runtime capture `capture` (the filter of its pool route).
bool captures_into(c10::Stream stream, unsigned long long capture) {
  const c10::DeviceGuard guard(stream.device());
  fooStreamCaptureStatus status = fooStreamCaptureStatusNone;
  unsigned long long id = 0;
  return fooStreamGetCaptureInfo(native_stream(stream), &status, &id) == fooSuccess &&
      status != fooStreamCaptureStatusNone && id == capture;
}

fooStreamCaptureMode runtime_mode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::Default: // PyTorch's CUDA graphs default to global, as here
    case at::GraphCaptureMode::Global: return fooStreamCaptureModeGlobal;
    case at::GraphCaptureMode::ThreadLocal: return fooStreamCaptureModeThreadLocal;
    case at::GraphCaptureMode::Relaxed: return fooStreamCaptureModeRelaxed;
  }
  TORCH_CHECK(false, "unknown graph capture mode ", static_cast<int>(mode));
}

class FooGraph final : public at::GraphImplInterface {
 public:
  explicit FooGraph(const at::GraphImplArgs& args) : keep_graph_(args.keep_graph) {}

  ~FooGraph() override {
    try {
      reset();
    } catch (...) { // a destructor must not throw; reset() reports through the runtime only
    }
  }

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    TORCH_CHECK(
        graph_ == nullptr && exec_ == nullptr && !capturing_,
        "this foo graph already holds a capture: call reset() before capturing again");
    const c10::Stream stream = current_stream_of_current_device();
    device_ = stream.device_index();
    stream_ = stream;
    const bool shared = pool.first != 0 || pool.second != 0;
    pool_ = shared ? pool : new_pool_id(/*for_graph=*/true);
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    fooStream_t handle = native_stream(stream);
    FOO_CHECK(fooStreamBeginCapture(handle, runtime_mode(mode)));
    try {
      fooStreamCaptureStatus status = fooStreamCaptureStatusNone;
      FOO_CHECK(fooStreamGetCaptureInfo(handle, &status, &capture_id_));
      const unsigned long long capture = capture_id_;
      const auto filter = [capture](c10::Stream s) { return captures_into(s, capture); };
      begin_allocate_to_pool(device_, capture, pool_, filter); // raises for a pool of another device
    } catch (...) {
      fooGraph_t graph = nullptr; // the stream must not stay in capture
      if (fooStreamEndCapture(handle, &graph) == fooSuccess) {
        (void)fooGraphDestroy(graph);
      }
      throw;
    }
    holds_pool_ = true;
    capturing_ = true;
    {
      const std::lock_guard<std::mutex> lock(registry_mutex());
      capturing_graphs()[capture_id_] = this;
    }
    captures_underway.fetch_add(1, std::memory_order_acq_rel);
  }

  // keep_alive (Graph.h) for the capture this graph records.
  void keep(std::shared_ptr<void> data) {
    kept_.push_back(std::move(data));
  }

  void capture_end() override {
    TORCH_CHECK(capturing_, "capture_end() without capture_begin() on this foo graph");
    const c10::Stream stream = current_stream(device_);
    const char* where = "a foo graph capture must end on the stream it began on (";
    TORCH_CHECK(stream == stream_, where, stream_, "), not on ", stream);
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    fooGraph_t graph = nullptr;
    const fooError_t error = fooStreamEndCapture(native_stream(stream), &graph);
    const std::string message = error == fooSuccess ? "" : fooGetLastErrorMessage();
    end_allocate_to_pool(capture_id_);
    forget_capture();
    const char* what = fooGetErrorString(error);
    if (error != fooSuccess) {
      kept_.clear(); // nothing recorded ever runs
    }
    TORCH_CHECK(error == fooSuccess, "foo graph capture failed: ", what, ": ", message);
    graph_ = graph;
    if (!keep_graph_) {
      instantiate();
      if (!debug_) { // debug_dump() needs the captured graph
        FOO_CHECK(fooGraphDestroy(graph_));
        graph_ = nullptr;
      }
    }
  }

  void instantiate() override {
    TORCH_CHECK(graph_ != nullptr, "instantiate() needs a captured foo graph (keep_graph=True, before reset())");
    if (exec_ != nullptr) {
      FOO_CHECK(fooGraphExecDestroy(exec_));
      exec_ = nullptr;
    }
    FOO_CHECK(fooGraphInstantiate(&exec_, graph_));
  }

  void replay() override {
    TORCH_CHECK(exec_ != nullptr || graph_ != nullptr, "replay() of a foo graph that holds no capture");
    if (exec_ == nullptr) {
      instantiate();
    }
    if (C10_UNLIKELY(replay_failed.load(std::memory_order_acquire))) {
      raise_replay_error();
    }
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    fooStream_t stream = current_stream_on(device_);
    FOO_CHECK(fooGraphLaunch(exec_, stream));
    if (!kept_.empty()) { // reset() frees what the launches use once the last one has finished
      record_launch(stream);
    }
  }

  void reset() override {
    if (capturing_) { // destroyed or reset during its capture: end it, discarding the work
      const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
      fooGraph_t graph = nullptr;
      if (fooStreamEndCapture(native_stream(stream_), &graph) == fooSuccess) {
        (void)fooGraphDestroy(graph);
      }
      end_allocate_to_pool(capture_id_);
      forget_capture();
    }
    if (graph_ != nullptr) {
      FOO_CHECK(fooGraphDestroy(graph_));
      graph_ = nullptr;
    }
    if (exec_ != nullptr) {
      FOO_CHECK(fooGraphExecDestroy(exec_)); // launches still pending finish first
      exec_ = nullptr;
    }
    // The last launch on each stream may still use what the graph keeps: wait for them all (launches
    // on two streams run one at a time, but in no set order).
    fooError_t waited = fooSuccess;
    for (const auto& [stream, event] : launched_) {
      const fooError_t error = fooEventSynchronize(event);
      waited = waited == fooSuccess ? error : waited;
      (void)fooEventDestroy(event);
    }
    launched_.clear();
    FOO_CHECK(waited);
    kept_.clear();
    if (holds_pool_) {
      release_pool(pool_);
      holds_pool_ = false;
    }
  }

  c10::MempoolId_t pool() const override {
    TORCH_CHECK(holds_pool_, "pool() of a foo graph is known once its capture began (and until reset())");
    return pool_;
  }

  void enable_debug_mode() override {
    debug_ = true;
  }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "debug_dump() needs enable_debug_mode() before the capture");
    TORCH_CHECK(graph_ != nullptr, "debug_dump() needs a captured foo graph (capture first, before reset())");
    FOO_CHECK(fooGraphDebugDotPrint(graph_, path.c_str()));
  }

 private:
  // Records the end of a launch on `stream`, which reset() waits for: one event per stream launched on.
  void record_launch(fooStream_t stream) {
    auto found = std::find_if(launched_.begin(), launched_.end(), [&](const auto& l) { return l.first == stream; });
    if (found == launched_.end()) {
      fooEvent_t event = nullptr;
      FOO_CHECK(fooEventCreate(&event));
      launched_.emplace_back(stream, event);
      found = launched_.end() - 1;
    }
    FOO_CHECK(fooEventRecord(found->second, stream));
  }

  void forget_capture() {
    {
      const std::lock_guard<std::mutex> lock(registry_mutex());
      capturing_graphs().erase(capture_id_);
    }
    capturing_ = false;
    captures_underway.fetch_sub(1, std::memory_order_acq_rel);
  }

  const bool keep_graph_;
  bool debug_ = false;
  bool capturing_ = false;
  bool holds_pool_ = false;
  c10::DeviceIndex device_ = 0;
  c10::Stream stream_{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  unsigned long long capture_id_ = 0;
  c10::MempoolId_t pool_{0, 0};
  fooGraph_t graph_ = nullptr;
  fooGraphExec_t exec_ = nullptr;
  std::vector<std::shared_ptr<void>> kept_; // what recorded host functions use (keep_alive)
  // Recorded after each launch on each stream while kept_ holds anything.
  std::vector<std::pair<fooStream_t, fooEvent_t>> launched_;
};

// graphs::check_not_capturing (Graph.h), installed while the extension loads.
void check_not_capturing(c10::DeviceIndex device, const std::string& what, const char* why) {
  if (captures_underway.load(std::memory_order_acquire) == 0) {
    return;
  }
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  fooStreamCaptureStatus status = fooStreamCaptureStatusNone;
  FOO_CHECK(fooStreamIsCapturing(current_stream_on(device), &status));
  TORCH_CHECK(status == fooStreamCaptureStatusNone, what, " cannot be captured in a foo graph: ", why);
}

[[maybe_unused]] const bool installed = (graphs::not_capturing_check = &check_not_capturing, true);

} // namespace

namespace graphs {

bool capturing_on(c10::DeviceIndex device, unsigned long long* capture) {
  if (captures_underway.load(std::memory_order_acquire) == 0) {
    return false;
  }
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  fooStreamCaptureStatus status = fooStreamCaptureStatusNone;
  FOO_CHECK(fooStreamGetCaptureInfo(current_stream_on(device), &status, capture));
  return status != fooStreamCaptureStatusNone;
}

void keep_alive(unsigned long long capture, std::shared_ptr<void> data) {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  const auto found = capturing_graphs().find(capture);
  TORCH_CHECK(
      found != capturing_graphs().end(),
      "stream capture ",
      capture,
      " belongs to no foo graph of this process (capture with torch.foo.graph or torch.accelerator.Graph)");
  found->second->keep(std::move(data));
}

void report_replay_error(std::string message) {
  const std::lock_guard<std::mutex> lock(replay_error_mutex);
  if (!replay_failed.load(std::memory_order_relaxed)) {
    replay_error = std::move(message);
    replay_failed.store(true, std::memory_order_release);
  }
}

} // namespace graphs
} // namespace torch_foo

// The key PyTorch looks the implementation up by: c10::DeviceTypeName(PrivateUse1, false), the
// renamed backend's name upper-cased. A string literal, not REGISTER_GRAPH_IMPL's token, which the
// preprocessor would expand if the name were a macro (a backend named "eof" gives EOF).
namespace at {
C10_REGISTER_TYPED_CLASS(GraphImplRegistry, "FOO", torch_foo::FooGraph)
} // namespace at

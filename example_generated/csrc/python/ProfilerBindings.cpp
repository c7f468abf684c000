// The bindings of the profiler answer's debugging tools: device monitoring (torch_foo/monitoring.py)
// and the allocator's memory history and snapshots (torch_foo/memory.py, in CUDA's format: see
// csrc/core/MemoryHistory.h).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../compat/PythonBindings.h" // libtorch_python's internals (tracebacks)
#include "../core/DeviceAllocator.h"
#include "../core/Exception.h"
#include "../core/MemoryHistory.h"
#include "Bindings.h"

namespace py = pybind11;

namespace torch_foo {
namespace {

// A runtime query for the monitoring functions (torch.foo.utilization, temperature, ...).
// NotSupported becomes RuntimeError naming the sensor, as torch.cuda's raise without NVML.
uint64_t device_metric(c10::DeviceIndex device, int metric) {
  uint64_t value = 0;
  FOO_CHECK(fooDeviceGetMetric(device, static_cast<fooDeviceMetric>(metric), &value));
  return value;
}

// (pid, bytes) of each process that holds memory of `device`.
std::vector<std::pair<int, size_t>> device_processes(c10::DeviceIndex device) {
  unsigned int count = 0;
  FOO_CHECK(fooDeviceGetProcesses(device, nullptr, &count));
  std::vector<fooProcessInfo> processes(count);
  FOO_CHECK(fooDeviceGetProcesses(device, processes.data(), &count));
  std::vector<std::pair<int, size_t>> result;
  for (unsigned int i = 0; i < count && i < processes.size(); ++i) {
    result.emplace_back(processes[i].pid, processes[i].usedMemory);
  }
  return result;
}

std::shared_ptr<c10::GatheredContext> gather_python_frames() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/false);
}

std::shared_ptr<c10::GatheredContext> gather_python_and_cpp_frames() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/true);
}

void record_memory_history(
    const std::optional<std::string>& enabled,
    const std::optional<std::string>& context,
    const std::string& stacks,
    int64_t max_entries,
    bool clear_history) {
  TORCH_CHECK(
      !enabled || *enabled == "state" || *enabled == "all",
      "enabled must be None, 'state' or 'all', not '",
      *enabled,
      "'");
  TORCH_CHECK(
      !context || *context == "state" || *context == "alloc" || *context == "all",
      "context must be None, 'state', 'alloc' or 'all', not '",
      *context,
      "'");
  TORCH_CHECK(stacks == "python" || stacks == "all", "stacks must be 'python' or 'all', not '", stacks, "'");
  TORCH_CHECK(max_entries >= 0, "max_entries must be non-negative, not ", max_entries);
  using memory_history::Context;
  Context when = Context::Never;
  if (enabled && context) {
    when = *context == "all" ? Context::All : *context == "alloc" ? Context::Alloc : Context::State;
  }
  memory_history::Recorder recorder = nullptr;
  if (when != Context::Never) {
    torch::installCapturedTracebackPython(); // lets CapturedTraceback read Python frames
    recorder = &gather_python_frames;
    if (stacks == "all") {
      torch::unwind::unwind(); // loads the unwinder's tables now rather than at the first allocation
      recorder = &gather_python_and_cpp_frames;
    }
  }
  const bool history = enabled && *enabled == "all";
  memory_history::configure(history, when, history ? static_cast<size_t>(max_entries) : 0, recorder, clear_history);
}

py::dict memory_snapshot() {
  const auto segments = memory_segments();
  const auto traces = memory_history::entries(static_cast<size_t>(device_count()));
  // Stack traces are symbolized together at the end (frames shared between traces are made once).
  std::vector<torch::CapturedTraceback*> tracebacks;
  std::vector<py::dict> owners;
  const auto add_frames = [&](const py::dict& d, const std::shared_ptr<c10::GatheredContext>& context) {
    if (auto* traceback = dynamic_cast<torch::CapturedTraceback*>(context.get())) {
      tracebacks.push_back(traceback);
      owners.push_back(d);
    } else {
      d["frames"] = py::list();
    }
  };
  py::list segment_list;
  for (const SegmentInfo& segment : segments) {
    py::dict d;
    d["device"] = segment.device;
    d["address"] = segment.address;
    d["total_size"] = segment.total_size;
    d["allocated_size"] = segment.allocated_size;
    d["active_size"] = segment.active_size;
    d["requested_size"] = segment.requested_size;
    d["stream"] = segment.stream;
    d["segment_type"] = segment.small ? "small" : "large";
    d["segment_pool_id"] = py::make_tuple(segment.pool.first, segment.pool.second);
    d["is_expandable"] = false;
    d["frames"] = py::list();
    py::list blocks;
    uintptr_t address = segment.address;
    for (const BlockInfo& block : segment.blocks) {
      py::dict b;
      b["address"] = address;
      b["size"] = block.size;
      b["requested_size"] = block.requested;
      b["state"] = block.allocated ? "active_allocated" : block.active ? "active_pending_free" : "inactive";
      add_frames(b, block.context);
      blocks.append(b);
      address += block.size;
    }
    d["blocks"] = blocks;
    segment_list.append(d);
  }
  static const char* const actions[] = {
      "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"};
  py::list device_traces;
  for (const auto& trace : traces) {
    py::list entries;
    for (const memory_history::Entry& entry : trace) {
      py::dict e;
      e["action"] = actions[static_cast<int>(entry.action)];
      e[entry.action == memory_history::Action::Oom ? "device_free" : "addr"] = entry.address;
      e["size"] = entry.size;
      e["stream"] = entry.stream;
      e["time_us"] = entry.time_us;
      add_frames(e, entry.context);
      entries.append(e);
    }
    device_traces.append(entries);
  }
  const torch::SymbolizedTracebacks symbolized = torch::symbolize(tracebacks);
  std::vector<py::dict> frames; // each distinct frame once, shared by the lists that contain it
  for (const auto& frame : symbolized.all_frames) {
    py::dict f;
    f["filename"] = frame.filename;
    f["name"] = frame.funcname;
    f["line"] = frame.lineno;
    frames.push_back(std::move(f));
  }
  for (size_t i = 0; i < symbolized.tracebacks.size(); ++i) {
    py::list list;
    for (const uint64_t index : symbolized.tracebacks[i]) {
      list.append(frames.at(index));
    }
    owners[i]["frames"] = list;
  }
  py::dict result;
  result["segments"] = segment_list;
  result["device_traces"] = device_traces;
  result["allocator_settings"] = py::dict();
  return result;
}

void bind_profiler(py::module_& m) {
  // Monitoring (torch_foo/monitoring.py).
  m.def("_device_metric", [](int64_t device, int metric) { return device_metric(checked(device), metric); });
  m.def("_device_processes", [](int64_t device) { return device_processes(checked(device)); });
  // Memory (torch_foo/memory.py).
  m.def("_record_memory_history", &record_memory_history);
  m.def("_memory_snapshot", &memory_snapshot);
}

FeatureBindings profiler_bindings("profiler", &bind_profiler);

} // namespace
} // namespace torch_foo

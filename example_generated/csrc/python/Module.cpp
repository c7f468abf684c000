// torch_foo._C: the Python bindings of the backend.
//
// Loading this module registers everything in C++ (kernels, allocator, guard, hooks: static
// initialisers in the other files). The functions below back the device module torch.foo;
// they are private (_-prefixed) and wrapped in Python by torch_foo/*.py. The optional features bind
// their own functions from their files in this directory (Bindings.h). The files of this directory are
// the only ones that include pybind11, whose headers are slow to compile: the module's unit parses them once.
#include <ATen/Context.h>
#pragma GCC diagnostic push // as in HostAllocator.cpp: the header's alignment warning
#pragma GCC diagnostic ignored "-Winterference-size"
#include <ATen/core/CachingHostAllocator.h>
#pragma GCC diagnostic pop
#include <c10/core/DeviceGuard.h>

#include <exception>

#include "../compat/PythonBindings.h" // libtorch_python's internals (THPEvent, THPGenerator)
#include "AutogradThreads.h"
#include "Bindings.h"

#include "../aten/Fallback.h"
#include "../core/Device.h"
#include "../core/DeviceAllocator.h"
#include "../core/Exception.h"
#include "../core/Generator.h"
#include "../core/Stream.h"
#include "../core/TorchVersion.h"

namespace py = pybind11;

namespace torch_foo {
namespace {

py::dict device_properties(c10::DeviceIndex device) {
  fooDeviceProp prop{};
  FOO_CHECK(fooGetDeviceProperties(&prop, device));
  py::dict d;
  d["name"] = std::string(prop.name);
  d["total_memory"] = prop.totalGlobalMem;
  d["multi_processor_count"] = prop.multiProcessorCount;
  d["max_threads_per_block"] = prop.maxThreadsPerBlock;
  d["shared_memory_per_block"] = prop.sharedMemPerBlock;
  d["major"] = prop.major;
  d["minor"] = prop.minor;
  d["host_accesses_device_memory"] = prop.hostAccessesDeviceMemory != 0;
  return d;
}

void synchronize(c10::DeviceIndex device) {
  note_synchronization();
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  FOO_CHECK(fooDeviceSynchronize());
  raise_deferred_error();
}

bool is_in_bad_fork() {
  int bad_fork = 0;
  FOO_CHECK(fooIsInBadFork(&bad_fork));
  return bad_fork != 0;
}

// A stream as torch.Stream's constructor takes it: (stream_id, device_index, device_type).
py::tuple stream_tuple(const c10::Stream& stream) {
  return py::make_tuple(stream.id(), stream.device_index(), static_cast<int>(stream.device_type()));
}

c10::Stream stream_of(int64_t stream_id, int64_t device) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, checked(device)), stream_id);
}

// Makes the stream current for its device and returns the previous one, as a tuple.
py::tuple swap_current_stream(int64_t stream_id, int64_t device) {
  return stream_tuple(torch_foo::exchange_stream(stream_of(stream_id, device)));
}

// A kernel that keeps the current stream busy: lets tests and benchmarks observe asynchrony
// (torch.cuda._sleep does the same with clock cycles).
void sleep_on_stream(int64_t microseconds) {
  TORCH_CHECK(microseconds >= 0, "_sleep: expected a non-negative duration, got ", microseconds);
  FOO_OP_CHECK(fooOpSleep(microseconds, current_stream()));
}

// A kernel that fails with `message`: lets tests see how a device fault is reported (at the
// next synchronisation with the stream).
void launch_failing_kernel(const std::string& message) {
  FOO_OP_CHECK(fooOpTrap(message.c_str(), current_stream()));
}

// Milliseconds between two torch.Event objects (torch.Event.elapsed_time accepts only the exact
// type as its argument, not torch.foo.Event).
double elapsed_time(py::handle start, py::handle end) {
  TORCH_CHECK(
      THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()), "elapsed_time: expected two torch.Event objects");
  return reinterpret_cast<THPEvent*>(start.ptr())->event.elapsedTime(reinterpret_cast<THPEvent*>(end.ptr())->event);
}

py::dict stat_dict(const c10::CachingAllocator::Stat& stat) {
  py::dict d;
  d["current"] = stat.current;
  d["peak"] = stat.peak;
  d["allocated"] = stat.allocated;
  d["freed"] = stat.freed;
  return d;
}

py::dict stat_dict(const c10::CachingAllocator::StatArray& stats) {
  const char* pools[] = {"all", "small_pool", "large_pool"};
  py::dict d;
  for (size_t i = 0; i < stats.size(); ++i) {
    d[pools[i]] = stat_dict(stats[i]);
  }
  return d;
}

// The allocator's statistics, nested as torch.accelerator.memory_stats flattens them.
py::dict memory_stats(c10::DeviceIndex device) {
  const auto s = device_allocator()->getDeviceStats(device);
  py::dict d;
  d["allocation"] = stat_dict(s.allocation);
  d["segment"] = stat_dict(s.segment);
  d["active"] = stat_dict(s.active);
  d["inactive_split"] = stat_dict(s.inactive_split);
  d["allocated_bytes"] = stat_dict(s.allocated_bytes);
  d["reserved_bytes"] = stat_dict(s.reserved_bytes);
  d["active_bytes"] = stat_dict(s.active_bytes);
  d["inactive_split_bytes"] = stat_dict(s.inactive_split_bytes);
  d["requested_bytes"] = stat_dict(s.requested_bytes);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["max_split_size"] = s.max_split_size;
  d["oversize_allocations"] = stat_dict(s.oversize_allocations);
  d["oversize_segments"] = stat_dict(s.oversize_segments);
  return d;
}

// The pinned-memory allocator's statistics, nested as torch.cuda.host_memory_stats_as_nested_dict.
py::dict host_memory_stats() {
  const at::HostStats s = at::getHostAllocator(c10::DeviceType::PrivateUse1)->get_stats();
  const auto duration = [](const c10::CachingAllocator::DurationStat& v) {
    py::dict d;
    d["total"] = v.total;
    d["max"] = v.max;
    d["min"] = v.min;
    d["count"] = v.count;
    d["avg"] = v.count == 0 ? 0 : v.total / v.count;
    return d;
  };
  py::dict d;
  d["allocations"] = stat_dict(s.allocations);
  d["allocated_bytes"] = stat_dict(s.allocated_bytes);
  d["active_requests"] = stat_dict(s.active_requests);
  d["active_bytes"] = stat_dict(s.active_bytes);
  d["num_host_alloc"] = s.num_host_alloc;
  d["num_host_free"] = s.num_host_free;
  d["host_alloc_time"] = duration(s.host_alloc_time);
  d["host_free_time"] = duration(s.host_free_time);
  return d;
}

bool can_access_peer(c10::DeviceIndex device, c10::DeviceIndex peer) {
  int access = 0;
  FOO_CHECK(fooDeviceCanAccessPeer(&access, device, peer));
  return access != 0;
}

// torch.foo.init(): the backend's checks (PyTorch runs the hooks' init() once per process: not a
// forked child, devices exist), then the current device's default stream, whose creation initialises
// the runtime and the device as creating a context does on CUDA. Work already queued is not waited for.
void init() {
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  const auto error = fooStreamQuery(nullptr);
  if (error != fooErrorNotReady) {
    FOO_CHECK(error);
  }
}

bool is_initialized(c10::DeviceIndex device) {
  int initialized = 0;
  return fooDeviceIsInitialized(device, &initialized) == fooSuccess && initialized != 0;
}

} // namespace

// The list of FeatureBindings, constant-initialised (empty before any feature's initialiser runs).
constinit FeatureBindings* first_feature = nullptr;
constinit FeatureBindings* last_feature = nullptr;

FeatureBindings::FeatureBindings(const char* feature, Bind bind) : feature_(feature), bind_(bind) {
  (last_feature != nullptr ? last_feature->next_ : first_feature) = this;
  last_feature = this;
}

void FeatureBindings::bind_all(pybind11::module_& module) {
  for (FeatureBindings* f = first_feature; f != nullptr; f = f->next_) {
    try {
      f->bind_(module);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "the bindings of ", f->feature_, " failed: ", e.what());
    }
  }
}

} // namespace torch_foo

// The torch version this extension is compiled against, as text in the file: torch_foo/_version.py
// reads it without loading the module when the import fails (an undefined symbol of another torch).
static __attribute__((used)) const char kBuiltWithTorch[] = "torch_foo built with torch " TORCH_VERSION;

PYBIND11_MODULE(_C, m) {
  namespace ns = torch_foo;
  ns::route_ops_to_fallback();
  m.doc() = "C++ part of the foo backend (private; use torch.foo)";
  m.def("_torch_version", [] { return std::string(ns::kTorchVersion); });
  m.def("_device_count", [] { return static_cast<int>(ns::device_count()); });
  m.def("_current_device", [] { return static_cast<int>(ns::current_device()); });
  m.def("_set_device", [](int64_t device) { ns::set_device(ns::checked(device)); });
  m.def("_exchange_device", [](int64_t device) { return static_cast<int>(ns::exchange_device(ns::checked(device))); });
  // With PyTorch's warning handling: set_sync_debug_mode("warn") reports it as a Python warning.
  m.def(
      "_synchronize", torch::wrap_pybind_function_no_gil([](int64_t device) { ns::synchronize(ns::checked(device)); }));
  m.def("_init", &ns::init);
  m.def("_is_initialized", [](int64_t device) { return ns::is_initialized(ns::checked(device)); });
  m.def(
      "_finish_autograd_device_thread", [](int64_t device) { ns::finish_autograd_device_thread(ns::checked(device)); });
  m.def("_device_properties", [](int64_t device) { return ns::device_properties(ns::checked(device)); });
  m.def("_fallback_ops", &ns::fallback_ops);
  m.def("_fallback_paths", &ns::fallback_paths);
  m.def("_set_async_fallback", &ns::set_async_fallback);
  m.def("_async_fallback_enabled", &ns::async_fallback_enabled);
  m.def("_async_fallback_calls_in_flight", &ns::async_fallback_calls_in_flight);
  m.def("_wait_for_async_fallback", &ns::wait_for_async_fallback, py::call_guard<py::gil_scoped_release>());
  // Peer access (torch_foo/device.py).
  m.def("_can_access_peer", [](int64_t device, int64_t peer) {
    return ns::can_access_peer(ns::checked(device), ns::checked(peer));
  });
  m.def("_is_in_bad_fork", &ns::is_in_bad_fork);
  // Streams (torch_foo/streams.py).
  m.def("_current_stream", [](int64_t device) { return ns::stream_tuple(ns::current_stream(ns::checked(device))); });
  m.def("_default_stream", [](int64_t device) { return ns::stream_tuple(ns::default_stream(ns::checked(device))); });
  m.def("_exchange_stream", &ns::swap_current_stream);
  m.def("_stream_priority", [](int64_t id, int64_t device) { return ns::stream_priority(ns::stream_of(id, device)); });
  m.def("_sleep", &ns::sleep_on_stream, py::call_guard<py::gil_scoped_release>());
  m.def("_elapsed_time", &ns::elapsed_time);
  m.def("_launch_failing_kernel", &ns::launch_failing_kernel);
  m.def("_external_stream", [](uintptr_t handle, int64_t device) {
    return ns::stream_tuple(ns::external_stream(reinterpret_cast<fooStream_t>(handle), ns::checked(device)));
  });
  m.def("_native_stream", [](int64_t stream_id, int64_t device) {
    return reinterpret_cast<uintptr_t>(ns::native_stream(ns::stream_of(stream_id, device)));
  });
  m.def("_set_sync_debug_mode", [](int mode) {
    TORCH_CHECK(mode >= 0 && mode <= 2, "invalid sync debug mode ", mode, ": expected 0, 1 or 2");
    ns::set_sync_debug_mode(static_cast<ns::SyncDebugMode>(mode));
  });
  m.def("_sync_debug_mode", [] { return static_cast<int>(ns::sync_debug_mode()); });
  m.def("_current_raw_stream", [](int64_t device) {
    return reinterpret_cast<uintptr_t>(ns::native_stream(ns::current_stream(ns::checked(device))));
  });
  // Memory (torch_foo/memory.py).
  m.def("_memory_stats", [](int64_t device) { return ns::memory_stats(ns::checked(device)); });
  m.def(
      "_reset_peak_memory_stats", [](int64_t device) { ns::device_allocator()->resetPeakStats(ns::checked(device)); });
  m.def("_reset_accumulated_memory_stats", [](int64_t device) {
    ns::device_allocator()->resetAccumulatedStats(ns::checked(device));
  });
  m.def("_empty_cache", [] { ns::device_allocator()->emptyCache(); }, py::call_guard<py::gil_scoped_release>());
  m.def("_mem_get_info", [](int64_t device) { return ns::device_allocator()->getMemoryInfo(ns::checked(device)); });
  m.def("_set_memory_fraction", [](double fraction, int64_t device) {
    ns::set_memory_fraction(fraction, ns::checked(device));
  });
  m.def("_memory_fraction", [](int64_t device) { return ns::memory_fraction(ns::checked(device)); });
  m.def("_raw_alloc", [](size_t nbytes, int64_t stream_id, int64_t device) {
    return reinterpret_cast<uintptr_t>(ns::raw_alloc(nbytes, ns::stream_of(stream_id, device)));
  });
  m.def(
      "_raw_delete",
      [](uintptr_t ptr) { ns::raw_delete(reinterpret_cast<void*>(ptr)); },
      py::call_guard<py::gil_scoped_release>());
  m.def("_host_memory_stats", &ns::host_memory_stats);
  m.def("_reset_accumulated_host_memory_stats", [] {
    at::getHostAllocator(c10::DeviceType::PrivateUse1)->reset_accumulated_stats();
  });
  m.def(
      "_reset_peak_host_memory_stats", [] { at::getHostAllocator(c10::DeviceType::PrivateUse1)->reset_peak_stats(); });
  // A new Python object for the device's default generator; torch_foo.random keeps one per device.
  m.def("_default_generator", [](int64_t device) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(ns::default_generator(ns::checked(device))));
  });
  // The optional features' functions (their <Feature>Bindings.cpp: Bindings.h).
  ns::FeatureBindings::bind_all(m);
}

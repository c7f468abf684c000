// The device timeline of torch.profiler.profile(activities=[..., ProfilerActivity.PrivateUse1]).
//
// Kineto asks the activity profiler registered here with REGISTER_PRIVATEUSE1_PROFILER for a session
// when a trace is prepared, starts and stops it with the trace, tells it the correlation id of every
// operator and record_function range while they run on a host thread (push/pop), and at the end has
// it log its activities, handing it a lookup from correlation id to the operator's activity. The
// session turns the runtime's tracing records (csrc/runtime/tracing.h) into Kineto activities: a
// track per device stream with kernels, copies and fills, each linked to the operator that launched
// it (which gives key_averages() its device times), the runtime calls and host waits on the host
// threads, and a span per record_function range on each stream. (The legacy profiler,
// torch.autograd.profiler.profile(use_device=...), is LegacyProfiler.cpp.)
//
// A real device keeps this file: its driver implements tracing.h from its own tracing hardware
// and timestamps, which is all this file uses.
//
// PyTorch's profiler API for PrivateUse1 and Kineto are private headers that need configuration
// macros: compat/Kineto.h includes them configured (first: the macros configure every header after).
#include "../compat/Kineto.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "../core/Exception.h"
#include "../runtime/tracing.h"

namespace torch_foo {
namespace {

using libkineto::ActivityType;

int64_t host_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A reading of both clocks at (nearly) the same moment: the host's wall clock, which PyTorch's
// profiler stamps operators with, and the runtime's tracing clock.
struct ClockPair {
  int64_t host = 0;
  int64_t device = 0;

  static ClockPair now() {
    uint64_t device = 0;
    const int64_t before = host_now_ns();
    (void)fooTracingGetTimestamp(&device);
    const int64_t after = host_now_ns();
    return {before + (after - before) / 2, static_cast<int64_t>(device)};
  }
};

// The Kineto activity type of each kind of runtime record (event records have none: they mark
// points, and CUDA traces leave them out too). Both directions read this one table: configure()
// enables the kinds of the types a trace asks for, processTrace() gives each record its type.
struct KindType {
  ActivityType type;
  fooActivityKind kind;
};
constexpr KindType kKindTypes[] = {
    {ActivityType::CONCURRENT_KERNEL, fooActivityKindKernel},
    {ActivityType::GPU_MEMCPY, fooActivityKindMemcpy},
    {ActivityType::GPU_MEMSET, fooActivityKindMemset},
    {ActivityType::PRIVATEUSE1_RUNTIME, fooActivityKindRuntime},
    {ActivityType::PRIVATEUSE1_RUNTIME, fooActivityKindSynchronization},
};

// The activity type of a record of `kind`; nullptr for kinds a trace leaves out.
const ActivityType* activity_type(fooActivityKind kind) {
  for (const auto& entry : kKindTypes) {
    if (entry.kind == kind) {
      return &entry.type;
    }
  }
  return nullptr;
}

class DeviceTraceSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit DeviceTraceSession(std::set<fooActivityKind> kinds, bool user_spans)
      : kinds_(std::move(kinds)), user_spans_(user_spans) {
    buffer_->span = libkineto::TraceSpan(0, 0, "foo device");
    buffer_->gpuOpCount = -1;
  }

  ~DeviceTraceSession() override {
    if (subscribed_) {
      detach();
    }
  }

  void start() override {
    FOO_CHECK(fooTracingSubscribe(&DeviceTraceSession::receive, this));
    subscribed_ = true;
    begin_ = ClockPair::now();
    for (const auto kind : kinds_) {
      FOO_CHECK(fooTracingEnable(kind, 1));
    }
    status_ = libkineto::TraceStatus::RECORDING;
  }

  // PyTorch synchronises the device before it stops the trace, so the flush collects everything.
  void stop() override {
    if (subscribed_) {
      detach();
    }
    end_ = ClockPair::now();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    return {};
  }

  void pushCorrelationId(uint64_t id) override {
    (void)fooTracingPushExternalId(fooExternalCorrelationOperator, id);
  }
  void popCorrelationId() override {
    (void)fooTracingPopExternalId(fooExternalCorrelationOperator, nullptr);
  }
  void pushUserCorrelationId(uint64_t id) override {
    (void)fooTracingPushExternalId(fooExternalCorrelationUser, id);
  }
  void popUserCorrelationId() override {
    (void)fooTracingPopExternalId(fooExternalCorrelationUser, nullptr);
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(
      libkineto::ActivityLogger& logger,
      libkineto::getLinkedActivityCallback linked_activity,
      int64_t window_start,
      int64_t window_end) override;

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const int device = devices_.empty() ? 0 : *devices_.begin();
    return std::make_unique<libkineto::DeviceInfo>(device_info(device));
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [key, is_default] : streams_) {
      const auto [device, stream] = key;
      std::string name = stream == 0 ? "synchronous copies" : "stream " + std::to_string(stream);
      if (is_default) {
        name += " (default)";
      }
      infos.push_back({stream, stream, device, name});
    }
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_); // owns the activities processTrace logged
  }

 private:
  static void receive(const fooActivityRecord* records, size_t count, void* self) {
    auto* session = static_cast<DeviceTraceSession*>(self);
    std::lock_guard<std::mutex> lock(session->mutex_);
    session->records_.insert(session->records_.end(), records, records + count);
  }

  void detach() {
    for (const auto kind : kinds_) {
      (void)fooTracingEnable(kind, 0);
    }
    (void)fooTracingFlush();
    (void)fooTracingSubscribe(nullptr, nullptr);
    subscribed_ = false;
  }

  // The host time of a runtime timestamp, interpolated between the readings at start and stop
  // (so a device clock that runs at another rate than the host's is corrected too).
  int64_t to_host(uint64_t t) const {
    const double device_span = static_cast<double>(end_.device - begin_.device);
    const double scale = device_span > 0 ? static_cast<double>(end_.host - begin_.host) / device_span : 1.0;
    return begin_.host + static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(t) - begin_.device) * scale);
  }

  static libkineto::DeviceInfo device_info(int device) {
    fooDeviceProp prop{};
    std::string label = "foo:" + std::to_string(device);
    if (fooGetDeviceProperties(&prop, device) == fooSuccess) {
      label = prop.name;
    }
    return {device, libkineto::kExceedMaxPid + device, "foo:" + std::to_string(device), label};
  }

  libkineto::GenericTraceActivity& add(ActivityType type, const std::string& name) {
    buffer_->emplace_activity(buffer_->span, type, name);
    return *buffer_->activities.back();
  }

  std::set<fooActivityKind> kinds_;
  bool user_spans_;
  bool subscribed_ = false;
  ClockPair begin_;
  ClockPair end_;
  std::mutex mutex_; // guards records_ (filled on stream workers and flushing threads)
  std::vector<fooActivityRecord> records_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
  std::set<int> devices_;
  std::map<std::pair<int, uint32_t>, bool> streams_; // (device, stream) -> is a default stream
};

void DeviceTraceSession::processTrace(
    libkineto::ActivityLogger& logger,
    libkineto::getLinkedActivityCallback linked_activity,
    int64_t window_start,
    int64_t window_end) {
  std::vector<fooActivityRecord> records;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    records.swap(records_);
  }
  std::set<uint32_t> device_work; // correlation ids of runtime calls whose device work is recorded
  for (const auto& r : records) {
    if (r.kind != fooActivityKindRuntime && r.kind != fooActivityKindSynchronization && r.correlationId != 0) {
      device_work.insert(r.correlationId);
    }
  }
  const int32_t pid = libkineto::processId();
  // The span of each record_function range on each stream: (device, stream, range) -> [start, end].
  std::map<std::tuple<int, uint32_t, uint64_t>, std::pair<int64_t, int64_t>> user_spans;
  for (const auto& r : records) {
    const int64_t start = to_host(r.start);
    const int64_t end = std::max(start, to_host(r.end));
    if (window_end > window_start && (end < window_start || start > window_end)) {
      continue; // outside the trace window (a profiler schedule's warm-up, say)
    }
    const bool on_host = r.kind == fooActivityKindRuntime || r.kind == fooActivityKindSynchronization;
    const ActivityType* type = activity_type(r.kind);
    if (type == nullptr) {
      continue; // event records
    }
    auto& a = add(*type, r.name != nullptr ? r.name : "");
    a.startTime = start;
    a.endTime = end;
    a.id = static_cast<int32_t>(r.correlationId);
    a.linked = r.externalId[fooExternalCorrelationOperator] != 0
        ? linked_activity(static_cast<int32_t>(r.externalId[fooExternalCorrelationOperator]))
        : nullptr;
    if (on_host) {
      a.device = pid;
      a.resource = static_cast<int32_t>(r.threadId);
      a.threadId = static_cast<int32_t>(r.threadId);
      if (r.device >= 0) {
        a.addMetadata("device", r.device);
      }
      if (r.kind == fooActivityKindSynchronization && r.stream != 0) {
        a.addMetadata("stream", r.stream);
      }
    } else {
      a.device = r.device;
      a.resource = static_cast<int32_t>(r.stream);
      a.threadId = static_cast<int32_t>(r.stream);
      devices_.insert(r.device);
      streams_[{r.device, r.stream}] = (r.flags & fooActivityFlagDefaultStream) != 0;
      a.addMetadata("device", r.device);
      a.addMetadata("stream", r.stream);
      a.addMetadata("correlation", r.correlationId);
      if (r.kind != fooActivityKindKernel) {
        a.addMetadata("bytes", r.bytes);
        if (end > start) {
          a.addMetadata("memory bandwidth (GB/s)", static_cast<double>(r.bytes) / static_cast<double>(end - start));
        }
      }
      const uint64_t range = r.externalId[fooExternalCorrelationUser];
      if (user_spans_ && range != 0) {
        auto [it, inserted] = user_spans.try_emplace({r.device, r.stream, range}, start, end);
        if (!inserted) {
          it->second = {std::min(it->second.first, start), std::max(it->second.second, end)};
        }
      }
    }
    // The arrow from a runtime call to the work it enqueued (Kineto's "ac2g" flows, as for CUDA).
    if (r.correlationId != 0 && r.kind != fooActivityKindSynchronization &&
        (!on_host || device_work.count(r.correlationId) != 0)) {
      a.flow.id = r.correlationId;
      a.flow.type = libkineto::kLinkAsyncCpuGpu;
      a.flow.start = on_host ? 1 : 0;
    }
  }
  for (const auto& [key, span] : user_spans) {
    const auto [device, stream, range] = key;
    const libkineto::ITraceActivity* annotation = linked_activity(static_cast<int32_t>(range));
    if (annotation == nullptr) {
      continue;
    }
    auto& a = add(ActivityType::GPU_USER_ANNOTATION, annotation->name());
    a.startTime = span.first;
    a.endTime = span.second;
    a.id = static_cast<int32_t>(range);
    a.device = device;
    a.resource = static_cast<int32_t>(stream);
    a.threadId = static_cast<int32_t>(stream);
  }
  for (const auto& activity : buffer_->activities) {
    logger.handleActivity(*activity); // the logger keeps pointers: buffer_ owns them (getTraceBuffer)
  }
  // Kineto asks getDeviceInfo() for one device; the others are named here.
  for (const int device : devices_) {
    if (device != *devices_.begin()) {
      logger.handleDeviceInfo(device_info(device), window_start);
    }
  }
  buffer_->span.startTime = window_start;
  buffer_->span.endTime = window_end;
  status_ = libkineto::TraceStatus::READY;
}

class DeviceActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    return name_;
  }

  const std::set<ActivityType>& availableActivities() const override {
    return activities_;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& activity_types, const libkineto::Config& /*config*/) override {
    std::set<fooActivityKind> kinds;
    for (const auto& [type, kind] : kKindTypes) {
      if (activity_types.count(type) != 0) {
        kinds.insert(kind);
      }
    }
    size_t device_kinds = kinds.count(fooActivityKindKernel);
    device_kinds += kinds.count(fooActivityKindMemcpy);
    device_kinds += kinds.count(fooActivityKindMemset);
    if (device_kinds == 0) {
      // ProfilerActivity.CPU alone (its types include PRIVATEUSE1_RUNTIME): no session, no cost.
      return nullptr;
    }
    return std::make_unique<DeviceTraceSession>(
        std::move(kinds), activity_types.count(ActivityType::GPU_USER_ANNOTATION) != 0);
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/,
      int64_t /*duration_ms*/,
      const std::set<ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_ = "foo";
  std::set<ActivityType> activities_{
      ActivityType::CONCURRENT_KERNEL,
      ActivityType::GPU_MEMCPY,
      ActivityType::GPU_MEMSET,
      ActivityType::GPU_USER_ANNOTATION,
      ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(DeviceActivityProfiler);

} // namespace
} // namespace torch_foo

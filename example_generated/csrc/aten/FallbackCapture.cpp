// The CPU fallback inside a graph capture (with the graphs answer): an operator without a
// foo kernel records its work into the capture instead of running it.
//
// The CPU kernel cannot run at capture time (device memory does not hold the values a replay will
// see), so the operator is recorded as stream-ordered work (FallbackStaged.h: staging copies into
// pinned memory, a host function running the CPU kernel, copies back), with the device outputs
// allocated at capture time from the graph's pool. Each replay recomputes the operator from the
// arguments' values at that point of the stream, without the host waiting.
//
// A failure of the CPU kernel during a replay fills the outputs with NaN (zero for integral types) and
// is raised by the next replay() (graphs::report_replay_error). The staging memory and captured
// arguments belong to the graph (graphs::keep_alive), which frees them after its last launch; launches
// of one executable graph never overlap (runtime.h), so one set of staging buffers serves every replay.
//
// Refused, with a RuntimeError naming the operator: random operators, operators whose output shape
// depends on values (nonzero, unique, masked_select), tensor-list and Device arguments, view
// results, results that are not tensors, resizing a written argument, sparse layouts.
// docs/integration/cpu-fallback.md ("Inside a graph capture") is the design.
#include <memory>
#include <string>

#include "../core/Device.h"
#include "../core/Graph.h"
#include "Fallback.h"
#include "FallbackStaged.h"

namespace torch_foo {
namespace {

// The capture whose graph keeps the call being recorded; set by capture_if_capturing on the capturing
// thread, around stage_call.
thread_local unsigned long long recording_capture = 0;

void keep_in_graph(const std::shared_ptr<StagedCall>& call) {
  graphs::keep_alive(recording_capture, call);
}

const StagingPolicy kCapturePolicy{
    /*keep=*/&keep_in_graph,
    /*release=*/nullptr,
    /*report=*/&graphs::report_replay_error,
    /*where=*/"the CPU fallback, recorded in the graph",
    /*mark_host_use=*/false,
    /*snapshot_cpu_arguments=*/false,
};

// The capture_runner (Fallback.h).
bool capture_if_capturing(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  unsigned long long capture = 0;
  if (C10_LIKELY(!graphs::capturing_on(current_device(), &capture))) {
    return false;
  }
  const c10::Device device(c10::DeviceType::PrivateUse1, current_device());
  recording_capture = capture;
  const std::optional<std::string> refused = stage_call(op, stack, cpu_key, device, kCapturePolicy);
  if (refused) {
    const c10::FunctionSchema& schema = op.schema();
    TORCH_CHECK(
        false,
        "operator ",
        schema.overload_name().empty() ? schema.name() : schema.name() + "." + schema.overload_name(),
        " (it has no foo kernel: the CPU fallback runs it) cannot be captured in a foo graph: ",
        *refused);
  }
  return true;
}

[[maybe_unused]] const bool installed = (capture_runner = &capture_if_capturing, true);

} // namespace
} // namespace torch_foo

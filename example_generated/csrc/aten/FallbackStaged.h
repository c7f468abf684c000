// The CPU fallback as stream-ordered work: what a graph capture records (with the graphs answer, through
// the fallback's capture_runner seam, Fallback.h) and what the asynchronous eager fallback enqueues (Fallback.cpp, when
// torch.foo.set_async_fallback(True) is on). Both need the same machinery, so it lives here, in
// the core of the layer, and names no feature.
//
// The work is, in stream order on the current stream of the operator's device:
//
//   1. an asynchronous copy of each device argument into pinned staging memory of its own (a
//      non-dense argument is packed on the device first);
//   2. a host function (runtime.h, LaunchHostFunc) that runs the CPU kernel on the staging tensors and
//      copies its results into staging tensors with the meta function's strides;
//   3. asynchronous copies of those results, and of the arguments it wrote, back to the device.
//
// The results' sizes and strides come from the operator's meta function, so the device results exist
// before the CPU kernel has run. The host function runs on a stream's worker: it never calls the
// runtime, restores the calling thread's state (grad mode, autocast, dispatch keys), never enters
// Python, and cannot raise: a failure of the CPU kernel fills the outputs with NaN (zero for integral
// types) and goes to the caller's StagingPolicy::report. docs/integration/cpu-fallback.md is the design.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ThreadLocalState.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_foo {

struct StagedCall;

// What becomes of a staged call: who keeps it alive, and where a failure of its CPU kernel goes.
struct StagingPolicy {
  // Takes the call before any work is enqueued. It must stay alive until its host function has run
  // (a graph: until its last replay); it is never freed on a stream's worker.
  void (*keep)(const std::shared_ptr<StagedCall>& call);
  // Called twice for each call, null for none: on the stream's worker once the host function ran (failed
  // or not), and on the calling thread once the work is enqueued, including the copies back that read the
  // staging memory (both on the calling thread when enqueuing failed before the host function was). The
  // two race: only after the second may the call be freed, or freeing a staging block (which records an
  // event on the stream) could come before the copy that reads it was enqueued. Must not call the
  // runtime, nor free the call.
  void (*release)(StagedCall* call);
  // On the stream's worker, when the CPU kernel failed: the message. Must not call the runtime.
  void (*report)(std::string message);
  // Where messages say the operator ran ("recorded in the graph", "the asynchronous CPU fallback").
  const char* where;
  // Marks each pinned staging tensor as used by the stream (record_host_use), so that it is reused only
  // after the stream's work reached the point where it was freed: needed when the call is freed soon
  // after its host function ran, while the copies back may still be queued. A graph keeps its staging
  // memory until its last launch and needs no mark.
  bool mark_host_use;
  // CPU tensors the operator reads are copied at enqueue time (the caller may change them before the
  // host function runs); a graph reads them at each replay instead.
  bool snapshot_cpu_arguments;
};

// One staged call: what its host function needs.
struct StagedCall {
  StagedCall(const c10::OperatorHandle& o, c10::DispatchKey key, const StagingPolicy& p)
      : op(o), cpu_key(key), policy(&p) {}

  c10::OperatorHandle op;
  c10::DispatchKey cpu_key;
  const StagingPolicy* policy;
  std::string name;
  std::vector<c10::IValue> arguments; // the operator's arguments, staging tensors in place of device tensors
  std::vector<at::Tensor> written; // staging tensors of written arguments (filled on failure)
  std::vector<at::Tensor> results; // for each return: the staging tensor of a new result, else undefined
  at::ThreadLocalState state; // the calling thread's grad mode, autocast and dispatch key state
  std::shared_ptr<void> owner; // free for the policy's use (the eager path: the call itself, until it ran)
  std::atomic<int> releases{0}; // free for the policy's use (the eager path: how many release() calls came)

  void run();
  void fill_invalid();
};

// Why `op` with the arguments on `stack` cannot run as staged work on `device` (random operators,
// data-dependent output shapes, no meta function, tensor lists it writes, Device arguments, views,
// results that are not tensors, sparse layouts, resizing a written argument that holds values, ...),
// or nothing, once the work is enqueued and the stack holds the results. When it returns a reason,
// nothing was enqueued and the stack is as it was (an empty out= argument may have been resized, as
// every path of the fallback would). Raises for failures of the runtime while enqueuing.
std::optional<std::string> stage_call(
    const c10::OperatorHandle& op,
    torch::jit::Stack* stack,
    c10::DispatchKey cpu_key,
    c10::Device device,
    const StagingPolicy& policy);

} // namespace torch_foo

// The CPU fallback: how operators without a foo kernel still work.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/native/CPUFallback.h>

namespace torch_foo {

// Boxed kernel registered for every operator that has no foo kernel: copies the device
// arguments to the CPU, runs the CPU kernel, and copies results (and mutated arguments) back.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The same for an operator dispatched on another key: runs the kernel registered for `cpu_key`, the
// CPU key of that functionality (SparseCPU for Sparsefoo, where the kernel_families answer has sparse tensors).
void cpu_fallback_for(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key);

// Sends the functional and in-place variants of PyTorch's structured operators straight to the
// fallback. Without this, their generic kernels (CompositeExplicitAutogradNonFunctional) would
// allocate an output on the device and call the out= variant through the fallback: an extra copy,
// and a deprecation warning from operators (mse_loss, ...) whose out= variant resizes its output.
// Also sends the operators that have both a CPU kernel and a generic decomposition
// (CompositeExplicitAutograd: layer_norm and group_norm through batch norm, addr, ...) to the CPU
// kernel, which the emulated device runs as its own: results equal the CPU's, with fewer fallback
// calls. The same for decompositions (CompositeImplicitAutograd) that the CPU replaces with its own
// kernel (mish_backward, silu_backward): in bfloat16 a decomposition rounds after every step and
// differs from the kernel. A device that implements such an operator registers its kernel, which
// takes precedence.
// Called once by route_ops_to_fallback().
void route_structured_ops_to_fallback();

// Called once when the Python module loads, after all kernels of this library are registered:
// route_structured_ops_to_fallback(), then the routing of each feature that added one.
void route_ops_to_fallback();

// ---- the seams of the optional features ---------------------------------------------------------
// A feature that changes what the fallback does fills one of these from a file of its own, at static
// initialisation (a namespace-scope FallbackExtension), so that this layer names no feature. Each
// is empty without its feature; the fallback tests one pointer per call.

// Runs `op` its own way and returns true, or returns false with the stack untouched (the
// kernel_families answer: the dtypes CUDA has and the CPU lacks).
using FallbackRunner = bool (*)(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key);
// Sends more operators to the fallback, once, when the Python module loads (route_ops_to_fallback;
// the kernel_families answer: the sparse operators).
using FallbackRouting = void (*)();

// Records `op` into the graph capture of the current stream and returns true, or returns false with
// the stack untouched when no capture records on it (the graphs answer's file, which
// sets it at static initialisation). Called before any other path, so that nothing runs eagerly
// inside a capture.
inline FallbackRunner capture_runner = nullptr;

// What a feature adds to the fallback: either or both, null for the other. At most one runner in a
// process, and four routings: one more makes route_ops_to_fallback() raise, when the module loads.
struct FallbackExtension {
  FallbackExtension(const char* feature, FallbackRunner runner, FallbackRouting routing);
};

// Names of the operators that ran through the fallback in this process, sorted.
std::vector<std::string> fallback_ops();

// For each operator that ran through the fallback: its name and its calls on the synchronous and on
// the asynchronous path, sorted by name (torch.foo.fallback_paths()).
std::vector<std::tuple<std::string, uint64_t, uint64_t>> fallback_paths();

// The asynchronous eager fallback (torch.foo.set_async_fallback, FOO_ASYNC_FALLBACK=1), off
// by default: an operator whose results' shapes follow from its arguments' metadata is enqueued as
// stream-ordered work (FallbackStaged.h) and returns device tensors at once; the CPU kernel's errors
// surface at the next synchronisation. Operators it cannot serve take the synchronous path.
void set_async_fallback(bool enabled);
bool async_fallback_enabled();

// The asynchronous fallback's calls enqueued whose CPU kernel has not finished running.
size_t async_fallback_calls_in_flight();

// Returns once no call of the asynchronous fallback is in flight. The backend module runs it before
// os.fork() (with the GIL released): a CPU kernel running on a stream's worker at the fork may hold a lock
// of torch's that the child, which has no such thread, would then wait on forever.
void wait_for_async_fallback();

// Runs one operator through the fallback from inside a native kernel, for cases that kernel
// does not handle (a rare dtype, say). Op is the operator's at::_ops struct.
template <typename Op, typename... Args>
decltype(auto) run_on_cpu(Args&&... args) {
  return at::native::call_fallback_fn<&cpu_fallback, Op>::call(std::forward<Args>(args)...);
}

} // namespace torch_foo

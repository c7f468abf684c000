// The CPU fallback, registered for the whole PrivateUse1 dispatch key.
//
// PyTorch has about 2,500 operators; a backend implements the ones that matter for speed and lets
// the rest run here. Each call costs two copies per tensor argument, so a real backend watches
// which operators land here: torch.foo.fallback_ops() lists them, and
// FOO_WARN_FALLBACK=1 warns once for each.
//
// Random operators that reach the fallback (multinomial, randperm, poisson, ...) must not draw from
// the CPU's generator: the fallback replaces their generator argument with a fresh CPU generator
// seeded from the foo generator (the one passed, or the device's default), so they are
// reproducible under torch.foo.manual_seed and leave torch.get_rng_state() untouched.
//
// This file is the boxed kernel itself. What it knows about each operator's schema, and the list of
// operators it ran, are in SchemaFacts.cpp; which operators are sent here although PyTorch has a
// generic kernel for them, in FallbackRouting.cpp.
#include "Fallback.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/_copy_from_and_resize.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include "../core/Device.h"
#include "../core/Generator.h"
#include "../core/Stream.h"
#include "Copy.h"
#include "FallbackStaged.h"
#include "SchemaFacts.h"

namespace torch_foo {
namespace {

// The features' seams (Fallback.h), filled before main by their files' static initialisers and only
// read afterwards. Constant-initialised: null before any initialiser runs, whatever the order.
constinit FallbackRunner feature_runner = nullptr;
constexpr size_t kMaxRoutings = 4;
constinit FallbackRouting feature_routings[kMaxRoutings] = {};
constinit size_t routing_count = 0;
constinit const char* conflict = nullptr; // the feature that found its seam taken, reported when the module loads

// Raises if the arguments of `op` live on two different foo devices, as CUDA kernels do (the
// fallback would otherwise quietly compute with both).
void check_same_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto arguments = op.schema().arguments().size();
  std::optional<c10::Device> first;
  const auto check = [&](const at::Tensor& t) {
    if (!t.defined() || !t.is_privateuseone()) {
      return;
    }
    if (!first) {
      first = t.device();
    }
    TORCH_CHECK(
        t.device() == *first,
        "Expected all tensors to be on the same device, but found at least two devices, ",
        *first,
        " and ",
        t.device(),
        "! (when checking arguments for ",
        op.schema().operator_name(),
        ")");
  };
  for (auto it = stack.end() - static_cast<std::ptrdiff_t>(arguments); it != stack.end(); ++it) {
    if (it->isTensor()) {
      check(it->toTensor());
    } else if (it->isTensorList()) {
      for (const at::Tensor& t : it->toTensorVector()) {
        check(t);
      }
    } else if (it->isOptionalTensorList()) {
      for (const auto& t : it->toOptionalTensorVector()) {
        if (t) {
          check(*t);
        }
      }
    }
  }
}

// The device an operator runs on: that of its first foo tensor, else the current device.
c10::Device device_of(c10::ArrayRef<c10::IValue> arguments) {
  for (const auto& value : arguments) {
    if (value.isTensor() && value.toTensor().defined() && value.toTensor().is_privateuseone()) {
      return value.toTensor().device();
    }
    if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList().vec()) {
        if (t.defined() && t.is_privateuseone()) {
          return t.device();
        }
      }
    }
  }
  return c10::Device(c10::DeviceType::PrivateUse1, current_device());
}

// Replaces each generator argument with a CPU generator seeded from the foo generator.
void seed_cpu_generators(const OpFacts& facts, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t first = stack->size() - op.schema().arguments().size();
  for (const size_t i : facts.generators) {
    c10::IValue& value = (*stack)[first + i];
    std::optional<at::Generator> gen;
    if (!value.isNone()) {
      gen = value.toGenerator();
    }
    const c10::Device device = device_of(c10::ArrayRef<c10::IValue>(*stack).slice(first));
    auto* generator = generator_for(gen, device);
    uint64_t seed = 0;
    {
      std::lock_guard<std::mutex> lock(generator->mutex_);
      at::philox_engine engine = generator->reserve(1).engine(0);
      seed = (static_cast<uint64_t>(engine()) << 32) | engine();
    }
    value = c10::IValue(at::make_generator<at::CPUGeneratorImpl>(seed));
  }
}

// A tensor argument that run_direct() copies with one transfer each way.
bool plain_device_tensor(const at::Tensor& t) {
  return t.is_privateuseone() && copies_in_one_transfer(t);
}

// The CPU copy of a device argument, which the CPU kernel must be able to take for the caller's tensor:
// same values, layout and dtype, and, for an argument it only reads, the same requires_grad flag. CPU
// kernels may decide what to compute from it (under grad mode): torch.sparse.mm(csr, dense, "amax")
// records which element won each maximum only when an input requires grad, and its backward kernel
// reads those indices; a copy without the flag made the forward return none, and the backward read
// past their end. Written arguments (in place, out=) do not get it: autograd has already checked
// them, and a CPU kernel resizing or writing them must not meet a leaf that requires grad.
at::Tensor host_argument(const at::Tensor& t, bool written) {
  at::Tensor host = plain_device_tensor(t) ? host_copy(t) : t.cpu(); // sparse layouts, conj/neg views
  if (!written && t.requires_grad() && !host.requires_grad()) {
    host.set_requires_grad(true);
  }
  return host;
}

// The CPU fallback for operators whose tensors are all single tensors (device tensors of any layout,
// or CPU tensors, which stay where they are): each device tensor is copied to the host once
// (host_argument), the CPU kernel runs, written arguments are copied back into the device tensors the
// caller passed, and new results are copied to the device of the first tensor argument. The transfers go straight to
// the runtime (Copy.h) rather than through _to_cpu and to() for every tensor, as
// at::native::cpu_fallback does. Returns false, leaving the stack alone, for anything else.
bool run_direct(const OpFacts& facts, const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey key) {
  if (!facts.direct || facts.tensors.empty()) {
    return false;
  }
  const size_t first = stack->size() - op.schema().arguments().size();
  const c10::IValue& lead = (*stack)[first + facts.tensors[0]];
  if (!lead.isTensor() || !lead.toTensor().defined() || !lead.toTensor().is_privateuseone()) {
    return false; // the general path decides where results go
  }
  for (const size_t i : facts.tensors) {
    const c10::IValue& value = (*stack)[first + i];
    if (value.isTensor() && value.toTensor().defined() && !value.toTensor().is_cpu() &&
        !value.toTensor().is_privateuseone()) {
      return false; // a tensor of a third device type: the general path copies it
    }
  }
  const c10::Device device = lead.toTensor().device();
  c10::SmallVector<at::Tensor, 4> originals(facts.tensors.size()); // the caller's device tensors
  c10::SmallVector<at::Tensor, 4> hosts(facts.tensors.size()); // their copies the CPU kernel sees
  for (size_t t = 0; t < facts.tensors.size(); ++t) {
    c10::IValue& value = (*stack)[first + facts.tensors[t]];
    if (value.isTensor() && value.toTensor().is_privateuseone()) {
      originals[t] = std::move(value).toTensor();
      for (size_t u = 0; u < t && !facts.written[t]; ++u) {
        if (!facts.written[u] && originals[u].is_same(originals[t])) {
          hosts[t] = hosts[u]; // read twice (x * x, addcmul_(g, g)): copied once
          break;
        }
      }
      if (!hosts[t].defined()) {
        hosts[t] = host_argument(originals[t], facts.written[t]);
      }
      value = c10::IValue(hosts[t]);
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(key), stack);
  // Written arguments go back into the caller's tensors, resized as the CPU kernel resized them.
  for (size_t t = 0; t < facts.tensors.size(); ++t) {
    if (!facts.written[t] || !originals[t].defined()) {
      continue;
    }
    if (plain_device_tensor(originals[t]) && hosts[t].layout() == c10::kStrided &&
        hosts[t].sizes() == originals[t].sizes()) {
      copy_into_device(originals[t], hosts[t]);
    } else {
      at::_copy_from_and_resize(hosts[t], originals[t]);
    }
  }
  const size_t results = stack->size() - facts.returns.size();
  for (size_t r = 0; r < facts.returns.size(); ++r) {
    c10::IValue& value = (*stack)[results + r];
    const int source = facts.returns[r];
    if (source >= 0 && originals[source].defined()) {
      value = c10::IValue(originals[source]); // the written argument itself, as the caller passed it
    } else if (source == kNewTensor && value.isTensor() && value.toTensor().defined() && value.toTensor().is_cpu()) {
      const at::Tensor& result = value.toTensor();
      value = c10::IValue(copies_in_one_transfer(result) ? device_copy(result, device) : result.to(device));
    }
  }
  return true;
}

// ---- the asynchronous eager fallback --------------------------------------------------------------

// The switch: FOO_ASYNC_FALLBACK=1 turns it on when the library loads, set_async_fallback at any time.
std::atomic<bool> async_enabled{[] {
  const char* env = std::getenv("FOO_ASYNC_FALLBACK");
  return env != nullptr && env[0] != '\0' && env[0] != '0';
}()};

// Calls whose host function has run, waiting to be freed on a thread that may call the runtime (freeing
// a pinned staging tensor records an event). A leaked singleton: a worker may finish during exit.
struct RetiredCalls {
  std::mutex mutex;
  std::vector<std::shared_ptr<void>> calls;
};
RetiredCalls& retired_calls() {
  static auto* retired = new RetiredCalls();
  return *retired;
}

// Frees the retired calls, on the calling thread. Skipped while another thread holds the list (a
// worker adding to it, or a parent's worker at the moment of a fork): the next call frees them.
void free_retired_calls() {
  RetiredCalls& retired = retired_calls();
  std::vector<std::shared_ptr<void>> calls;
  {
    const std::unique_lock<std::mutex> lock(retired.mutex, std::try_to_lock);
    if (!lock.owns_lock() || retired.calls.empty()) {
      return;
    }
    calls.swap(retired.calls);
  }
  // `calls` is freed here, on the caller's thread.
}

// Calls enqueued whose host function has not finished: a fork waits for none to be left
// (wait_for_async_fallback), as the CPU kernel running on a stream's worker may hold one of torch's locks
// (a function-local static being initialised, say) that the child, without that thread, would wait on forever.
std::atomic<size_t> calls_in_flight{0};

// The policy's keep: the call owns itself until its host function has run.
void keep_until_run(const std::shared_ptr<StagedCall>& call) {
  call->owner = call;
  calls_in_flight.fetch_add(1, std::memory_order_relaxed);
}

// The policy's release, on the stream's worker after the host function ran and on the calling thread
// after the enqueuing: the second moves the call's ownership to the retired list (a move, so nothing is
// freed on the worker).
void release(StagedCall* call) {
  if (call->releases.fetch_add(1, std::memory_order_acq_rel) == 0) {
    return;
  }
  {
    RetiredCalls& retired = retired_calls();
    const std::lock_guard<std::mutex> lock(retired.mutex);
    retired.calls.push_back(std::move(call->owner));
  }
  calls_in_flight.fetch_sub(1, std::memory_order_release);
}

const StagingPolicy kAsyncPolicy{
    /*keep=*/&keep_until_run,
    /*release=*/&release,
    /*report=*/&report_deferred_error,
    /*where=*/"the asynchronous CPU fallback",
    /*mark_host_use=*/true,
    /*snapshot_cpu_arguments=*/true,
};

// Runs `op` on the asynchronous path and returns true, or returns false with the stack untouched when
// that path cannot serve it (FallbackStaged.h says which operators), for the synchronous path to run.
bool run_async(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  if (cpu_key != c10::DispatchKey::CPU) {
    return false; // sparse layouts
  }
  const size_t first = stack->size() - op.schema().arguments().size();
  std::optional<c10::Device> device; // that of the first device tensor, single or in a list (cat)
  for (auto it = stack->begin() + static_cast<std::ptrdiff_t>(first); it != stack->end() && !device; ++it) {
    if (it->isTensor() && it->toTensor().defined() && it->toTensor().is_privateuseone()) {
      device = it->toTensor().device();
    } else if (it->isTensorList()) {
      for (const at::Tensor& t : it->toTensorList().vec()) {
        if (t.defined() && t.is_privateuseone()) {
          device = t.device();
          break;
        }
      }
    }
  }
  if (!device) {
    return false; // no device tensor argument (only CPU tensors): the synchronous path decides
  }
  free_retired_calls();
  return !stage_call(op, stack, cpu_key, *device, kAsyncPolicy).has_value();
}

} // namespace

void set_async_fallback(bool enabled) {
  async_enabled.store(enabled, std::memory_order_relaxed);
}

bool async_fallback_enabled() {
  return async_enabled.load(std::memory_order_relaxed);
}

size_t async_fallback_calls_in_flight() {
  return calls_in_flight.load(std::memory_order_acquire);
}

void wait_for_async_fallback() {
  // Rare (a fork) and short (the queued CPU kernels): polling keeps the enqueuing path free of a lock.
  while (calls_in_flight.load(std::memory_order_acquire) != 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpu_fallback_for(op, stack, c10::DispatchKey::CPU);
}

void cpu_fallback_for(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  // An operator with kernels for other devices only (CUDA's fused RNN cells, say) would reach the
  // dispatcher's "Could not run ... with arguments from the 'CPU' backend", which names the wrong
  // device: say what is missing instead. One lookup in the operator's dispatch table.
  TORCH_CHECK_NOT_IMPLEMENTED(
      op.hasComputedKernelForDispatchKey(cpu_key),
      "operator ",
      op.schema().operator_name(),
      " has no foo kernel, and the CPU fallback cannot run it: the CPU has no kernel of it either (no ",
      cpu_key,
      " kernel: PyTorch has kernels of it for other devices only, so foo needs one of its own)",
      // Only without the kernel_families answer, whose fused cells are all such operators.
      op.schema().name().rfind("aten::_thnn_fused_", 0) == 0
          ? ". nn.LSTM, nn.GRU and their cells need it: render the project with the kernel_families answer, which "
            "includes the fused recurrent cells"
          : "");
  check_same_device(op, *stack);
  // Inside a graph capture the operator is recorded instead (capture_runner): this path copies
  // the tensors to the host and waits for the device, which a capture cannot record.
  if (capture_runner != nullptr && capture_runner(op, stack, cpu_key)) {
    return;
  }
  const OpFacts& facts = facts_for(op);
  if (!facts.generators.empty()) {
    seed_cpu_generators(facts, op, stack);
  }
  // Profilers see the operator, not the dozen it runs here (copies to the CPU and back, the CPU
  // kernel): its copies are attributed to it, and profiling a model that falls back costs what it
  // costs on the CPU instead of several times more. Without a
  // profiler (no callbacks) there is nothing to hide, and switching costs more than a small copy.
  std::optional<at::DisableRecordFunctionGuard> record_only_the_operator;
  if (at::hasCallbacks()) {
    record_only_the_operator.emplace();
  }
  if (feature_runner != nullptr && feature_runner(op, stack, cpu_key)) {
    facts.sync_calls.fetch_add(1, std::memory_order_relaxed);
    return; // the feature ran it (a dtype that CUDA supports and the CPU kernel does not)
  }
  // The asynchronous path, when switched on, for the operators it can serve; the others go on below.
  if (async_enabled.load(std::memory_order_relaxed) && run_async(op, stack, cpu_key)) {
    facts.async_calls.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  facts.sync_calls.fetch_add(1, std::memory_order_relaxed);
  if (run_direct(facts, op, stack, cpu_key)) {
    return;
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false, cpu_key);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

FallbackExtension::FallbackExtension(const char* feature, FallbackRunner runner, FallbackRouting routing) {
  // No exception can leave a static initialiser: a conflict is kept for route_ops_to_fallback to raise.
  if ((runner != nullptr && feature_runner != nullptr) || (routing != nullptr && routing_count == kMaxRoutings)) {
    conflict = feature;
    return;
  }
  if (runner != nullptr) {
    feature_runner = runner;
  }
  if (routing != nullptr) {
    feature_routings[routing_count++] = routing;
  }
}

void route_ops_to_fallback() {
  TORCH_CHECK(
      conflict == nullptr,
      "the CPU fallback's seam that ",
      conflict,
      " fills is taken already (csrc/aten/Fallback.h: one runner and ",
      kMaxRoutings,
      " routings)");
  route_structured_ops_to_fallback();
  for (size_t i = 0; i < routing_count; ++i) {
    feature_routings[i]();
  }
}

} // namespace torch_foo

// The CPU fallback inside a graph capture (with the graphs answer): an operator without a
// foo kernel records its work into the capture instead of running it.
//
// The CPU kernel cannot run at capture time (device memory does not hold the values a replay will
// see), so the recorded work is, in stream order on the capturing stream:
//
//   1. an asynchronous copy of each device argument into pinned staging memory of its own (a
//      non-dense argument is packed on the device first, by a captured copy);
//   2. a host function (runtime.h, LaunchHostFunc) that runs the CPU kernel on the staging tensors;
//   3. asynchronous copies of its results, and of the arguments it wrote, back to the device.
//
// Output sizes and strides come from the operator's meta function (a C++ meta kernel, or a Python
// meta registration, which takes the GIL on the capturing thread), and the device outputs are
// allocated at capture time from the graph's pool. The host function copies the CPU kernel's results
// into staging tensors with the meta strides, so that a result whose strides differ from the meta's
// still lands element by element. Each replay recomputes the operator from the arguments' values at
// that point of the stream, without the host waiting.
//
// The host function runs on a stream's worker: it never calls the runtime, restores the capturing
// thread's state (grad mode, autocast, dispatch keys: at::ThreadLocalStateGuard), never enters Python
// (the Python dispatch keys are excluded, so no GIL is taken while a thread that holds it waits for
// the stream), and uses at most at::get_num_threads() intra-op threads. It cannot raise: a failure of
// the CPU kernel fills the outputs with NaN (zero for integral types) and is raised by the next
// replay() (graphs::report_replay_error). The staging memory and captured arguments belong to the
// graph (graphs::keep_alive), which frees them after its last launch; launches of one executable
// graph never overlap (runtime.h), so one set of staging buffers serves every replay.
//
// Refused, with a RuntimeError naming the operator: random operators, operators whose output shape
// depends on values (nonzero, unique, masked_select), tensor-list and Device arguments, view
// results, results that are not tensors, resizing a written argument, sparse layouts.
// docs/integration/cpu-fallback.md ("Inside a graph capture") is the design.
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "../core/Device.h"
#include "../core/Exception.h"
#include "../core/Graph.h"
#include "../core/Stream.h"
#include "../runtime/runtime.h"
#include "Copy.h"
#include "Fallback.h"
#include "SchemaFacts.h"

namespace torch_foo {
namespace {

// One recorded call: what its host function needs at every replay.
struct CapturedCall {
  CapturedCall(const c10::OperatorHandle& o, c10::DispatchKey key) : op(o), cpu_key(key) {}

  c10::OperatorHandle op;
  c10::DispatchKey cpu_key;
  std::string name;
  std::vector<c10::IValue> arguments; // the operator's arguments, staging tensors in place of device tensors
  std::vector<at::Tensor> written; // staging tensors of written arguments (filled on failure)
  std::vector<at::Tensor> results; // for each return: the staging tensor of a new result, else undefined
  at::ThreadLocalState state; // the capturing thread's grad mode, autocast and dispatch key state

  void run();
  void fill_invalid();
};

// The intra-op pool: each worker thread sets its own thread count once, as the autograd engine's
// threads do (with OpenMP, a thread that never did would start a team of one thread per core).
void bound_intra_op_threads() {
  thread_local bool done = false;
  if (!done) {
    at::init_num_threads();
    done = true;
  }
}

void CapturedCall::run() {
  bound_intra_op_threads();
  const at::ThreadLocalStateGuard restore(state);
  // Python kernels and modes would take the GIL here, on a stream's worker, while the thread that
  // holds it may be waiting for this stream.
  const c10::impl::ExcludeDispatchKeyGuard no_python(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  torch::jit::Stack stack(arguments);
  op.redispatchBoxed(c10::DispatchKeySet(cpu_key), &stack);
  TORCH_CHECK(
      stack.size() == results.size(), "the CPU kernel returned ", stack.size(), " values, not ", results.size());
  for (size_t r = 0; r < results.size(); ++r) {
    const at::Tensor& staging = results[r];
    if (!staging.defined()) {
      continue;
    }
    TORCH_CHECK(
        stack[r].isTensor() && stack[r].toTensor().defined(),
        "result ",
        r,
        " is missing from the CPU kernel's results");
    const at::Tensor& result = stack[r].toTensor();
    TORCH_CHECK(
        result.sizes() == staging.sizes() && result.scalar_type() == staging.scalar_type(),
        "result ",
        r,
        " of the CPU kernel has sizes ",
        result.sizes(),
        " and dtype ",
        result.scalar_type(),
        ", where the operator's meta function gave ",
        staging.sizes(),
        " and ",
        staging.scalar_type());
#ifndef NDEBUG
    // Debug builds: the meta function's strides, which the device output has, against the kernel's.
    // A difference is harmless (the copy below goes element by element) but worth knowing.
    if (result.strides() != staging.strides() && result.numel() > 1) {
      TORCH_WARN_ONCE(
          "meta strides ", staging.strides(), " differ from the CPU kernel's ", result.strides(), " for ", name);
    }
#endif
    staging.copy_(result);
  }
}

void CapturedCall::fill_invalid() {
  const auto fill = [](const at::Tensor& t) {
    if (!t.defined() || t.numel() == 0) {
      return;
    }
    if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) {
      t.fill_(std::numeric_limits<double>::quiet_NaN());
    } else {
      t.zero_();
    }
  };
  for (const at::Tensor& t : results) {
    fill(t);
  }
  for (const at::Tensor& t : written) {
    fill(t);
  }
}

// The host function: runs the CPU kernel; a failure cannot raise here and is reported to the next replay().
void run_captured_call(void* data) {
  auto* call = static_cast<CapturedCall*>(data);
  try {
    call->run();
  } catch (const std::exception& e) {
    std::string message = "operator " + call->name + " (the CPU fallback, recorded in the graph) failed: ";
    const auto* error = dynamic_cast<const c10::Error*>(&e);
    message += error != nullptr ? error->what_without_backtrace() : e.what();
    graphs::report_replay_error(std::move(message));
    try {
      call->fill_invalid();
    } catch (...) { // nothing can leave a host function
    }
  }
}

[[noreturn]] void refuse(const std::string& name, const std::string& why) {
  TORCH_CHECK(
      false,
      "operator ",
      name,
      " (it has no foo kernel: the CPU fallback runs it) cannot be captured in a foo graph: ",
      why);
}

// A tensor on the meta device with the sizes, strides and dtype of `t`.
at::Tensor meta_like(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta).pinned_memory(false));
}

// A pinned host tensor with the sizes, strides and dtype of `t`: its memory has the layout of the
// memory of `t`, so that one copy of the bytes moves every element.
at::Tensor pinned_like(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kCPU).pinned_memory(true));
}

// The bytes that the elements of a dense tensor span, from its first element.
size_t span_bytes(const at::Tensor& t) {
  if (t.numel() == 0) {
    return 0;
  }
  return at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.itemsize());
}

// Enqueues a copy of `bytes` between device memory and pinned host memory on `stream`.
void copy_async(void* dst, const void* src, size_t bytes, bool to_device, fooStream_t stream) {
  if (bytes > 0) {
    const auto kind = to_device ? fooMemcpyHostToDevice : fooMemcpyDeviceToHost;
    FOO_CHECK(fooMemcpyAsync(dst, src, bytes, kind, stream));
  }
}

// Operators whose meta function and CPU kernel disagree on the sizes of some results (torch 2.15:
// embedding_bag's offset2bag and max_indices depend on the mode on the CPU, not in the meta function).
// Found by the fallback sweep under capture; any other disagreement fails the replay that meets it.
bool meta_disagrees(const std::string& name) {
  return name == "aten::_embedding_bag" || name == "aten::_embedding_bag_forward_only";
}

// A device argument as the recorded work moves it.
struct Staged {
  at::Tensor argument; // the caller's tensor
  at::Tensor device; // the memory the copies read and write: the argument, or its packed copy
  at::Tensor host; // its pinned staging tensor
  bool written = false;
};

void record(
    const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key, unsigned long long capture) {
  const OpFacts& facts = facts_for(op);
  const c10::FunctionSchema& schema = op.schema();
  const std::string name =
      schema.overload_name().empty() ? schema.name() : schema.name() + "." + schema.overload_name();
  if (!facts.generators.empty() || op.hasTag(at::Tag::nondeterministic_seeded)) {
    refuse(
        name,
        "it draws random numbers, and a replay would repeat the numbers of the capture (docs/graphs.md, Random "
        "numbers)");
  }
  if (meta_disagrees(schema.name())) {
    refuse(
        name,
        "its meta function and its CPU kernel give its auxiliary results (offset2bag, bag_size, max_indices) "
        "different sizes, and the graph's outputs must have the sizes the replays write");
  }
  if (op.hasTag(at::Tag::dynamic_output_shape)) {
    refuse(name, "the shape of its result depends on the values of its inputs, which a capture does not know");
  }
  if (!facts.direct && !facts.direct_but_read_lists) {
    refuse(
        name,
        "only operators whose tensor arguments are single tensors or lists it only reads, and whose results are "
        "new tensors or written arguments, can be recorded (not written tensor lists, Device arguments or views)");
  }
  for (const int r : facts.returns) {
    if (r == kNoTensor) {
      refuse(name, "it returns a value that is not a tensor, which the host would need at capture time");
    }
  }
  const size_t count = schema.arguments().size();
  const size_t first = stack->size() - count;
  const c10::DeviceIndex index = current_device();
  const c10::Device device(c10::DeviceType::PrivateUse1, index);

  // The meta function gives the results' sizes and strides, and how written arguments would be resized.
  torch::jit::Stack meta(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  std::vector<at::Tensor> meta_written(facts.tensors.size());
  for (size_t t = 0; t < facts.tensors.size(); ++t) {
    c10::IValue& value = meta[facts.tensors[t]];
    if (!value.isTensor() || !value.toTensor().defined()) {
      continue;
    }
    const at::Tensor& tensor = value.toTensor();
    if (tensor.layout() != c10::kStrided) {
      refuse(name, "only strided tensors can be staged, not " + c10::str(tensor.layout()));
    }
    if (!tensor.is_cpu() && tensor.device() != device) {
      refuse(name, "its tensors must be on the capturing device " + device.str() + ", not " + tensor.device().str());
    }
    if (tensor.is_cpu() && facts.written[t]) {
      refuse(name, "it writes a CPU tensor, which a replay would write at a time the host does not know");
    }
    if (tensor.is_cpu() && tensor.dim() == 0) {
      continue; // a scalar (perhaps a wrapped number, which type promotion treats apart): meta kernels take it
    }
    at::Tensor m = meta_like(tensor);
    if (facts.written[t]) {
      meta_written[t] = m;
    }
    value = c10::IValue(std::move(m));
  }
  for (const size_t position : facts.read_lists) {
    c10::IValue& value = meta[position];
    c10::List<at::Tensor> metas;
    for (const at::Tensor& tensor : value.toTensorList()) {
      if (tensor.layout() != c10::kStrided) {
        refuse(name, "only strided tensors can be staged, not " + c10::str(tensor.layout()));
      }
      if (!tensor.is_cpu() && tensor.device() != device) {
        refuse(name, "its tensors must be on the capturing device " + device.str() + ", not " + tensor.device().str());
      }
      metas.push_back(meta_like(tensor));
    }
    value = c10::IValue(std::move(metas));
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::NotImplementedError& e) {
    refuse(
        name, std::string("it has no meta function to give its results' shapes (") + e.what_without_backtrace() + ")");
  }
  TORCH_INTERNAL_ASSERT(meta.size() == facts.returns.size());
  // A written argument the operator resizes: an empty one (what PyTorch's generic kernels pass to
  // out= variants: abs calls abs.out) gets its size now, from the graph's pool; resizing one that
  // holds values raises, as the caller's tensor would change at capture time only.
  for (size_t t = 0; t < facts.tensors.size(); ++t) {
    if (!meta_written[t].defined()) {
      continue;
    }
    const at::Tensor& argument = (*stack)[first + facts.tensors[t]].toTensor();
    if (meta_written[t].sizes() == argument.sizes()) {
      continue;
    }
    if (argument.numel() != 0 || !meta_written[t].is_contiguous()) {
      refuse(
          name,
          "it would resize its written argument (out=) from " + c10::str(argument.sizes()) + " to " +
              c10::str(meta_written[t].sizes()) + ", which a replay cannot do: pass one of the result's size");
    }
    argument.resize_(meta_written[t].sizes());
  }

  // Nothing is recorded before this point. The graph owns the call from here on, so that work
  // recorded before a failure below never uses freed memory.
  auto call = std::make_shared<CapturedCall>(op, cpu_key);
  call->name = name;
  call->arguments.assign(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  call->results.resize(facts.returns.size());
  CapturedCall* recorded = call.get();
  graphs::keep_alive(capture, std::move(call));

  const c10::DeviceGuard guard(device);
  fooStream_t stream = current_stream_on(index);
  std::vector<Staged> staged(facts.tensors.size());
  for (size_t t = 0; t < facts.tensors.size(); ++t) {
    c10::IValue& value = recorded->arguments[facts.tensors[t]];
    if (!value.isTensor() || !value.toTensor().defined() || !value.toTensor().is_privateuseone()) {
      continue; // None, undefined, or a CPU tensor the kernel reads at each replay
    }
    Staged& s = staged[t];
    s.argument = value.toTensor();
    s.written = facts.written[t];
    for (size_t u = 0; u < t && !s.written; ++u) {
      if (!staged[u].written && staged[u].argument.defined() && staged[u].argument.is_same(s.argument)) {
        s.device = staged[u].device; // read twice (x * x): staged once
        s.host = staged[u].host;
        break;
      }
    }
    if (!s.host.defined()) {
      // Packed on the device (a captured copy) when its elements do not fill their memory.
      s.device = copies_in_one_transfer(s.argument) ? s.argument : s.argument.resolve_conj().resolve_neg().contiguous();
      s.host = pinned_like(s.device);
      copy_async(s.host.data_ptr(), s.device.const_data_ptr(), span_bytes(s.device), /*to_device=*/false, stream);
    }
    at::Tensor host = s.host;
    if (!s.written && s.argument.requires_grad()) { // as host_argument() in Fallback.cpp
      host = s.host.detach();
      host.set_requires_grad(true);
    }
    if (s.written) {
      recorded->written.push_back(s.host);
    }
    value = c10::IValue(std::move(host));
  }

  // The elements of read-only lists: staged like single arguments that are read; CPU elements stay.
  for (const size_t position : facts.read_lists) {
    c10::IValue& value = recorded->arguments[position];
    c10::List<at::Tensor> hosts;
    for (const at::Tensor& element : value.toTensorList()) {
      if (!element.is_privateuseone()) {
        hosts.push_back(element);
        continue;
      }
      const at::Tensor packed =
          copies_in_one_transfer(element) ? element : element.resolve_conj().resolve_neg().contiguous();
      at::Tensor host = pinned_like(packed);
      copy_async(host.data_ptr(), packed.const_data_ptr(), span_bytes(packed), /*to_device=*/false, stream);
      hosts.push_back(std::move(host));
    }
    value = c10::IValue(std::move(hosts));
  }

  // The results the graph owns: device memory from its pool and a staging tensor each.
  std::vector<c10::IValue> returned(facts.returns.size());
  for (size_t r = 0; r < facts.returns.size(); ++r) {
    const int source = facts.returns[r];
    if (source >= 0) {
      returned[r] = (*stack)[first + facts.tensors[source]]; // the written argument, as the caller passed it
      continue;
    }
    if (!meta[r].isTensor() || !meta[r].toTensor().defined()) {
      returned[r] = meta[r]; // an undefined result (a backward's output mask)
      continue;
    }
    const at::Tensor& shape = meta[r].toTensor();
    recorded->results[r] = pinned_like(shape);
    returned[r] = c10::IValue(at::empty_strided(shape.sizes(), shape.strides(), shape.options().device(device)));
  }

  FOO_CHECK(fooLaunchHostFunc(stream, &run_captured_call, recorded));
  for (size_t r = 0; r < returned.size(); ++r) {
    if (recorded->results[r].defined()) {
      const at::Tensor& out = returned[r].toTensor();
      copy_async(out.data_ptr(), recorded->results[r].const_data_ptr(), span_bytes(out), /*to_device=*/true, stream);
    }
  }
  for (const Staged& s : staged) {
    if (!s.written) {
      continue;
    }
    copy_async(s.device.data_ptr(), s.host.const_data_ptr(), span_bytes(s.device), /*to_device=*/true, stream);
    if (!s.device.is_same(s.argument)) {
      s.argument.copy_(s.device); // unpacked on the device
    }
  }
  stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  for (c10::IValue& value : returned) {
    stack->push_back(std::move(value));
  }
}

// The capture_runner (Fallback.h).
bool capture_if_capturing(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  unsigned long long capture = 0;
  if (C10_LIKELY(!graphs::capturing_on(current_device(), &capture))) {
    return false;
  }
  record(op, stack, cpu_key, capture);
  return true;
}

[[maybe_unused]] const bool installed = (capture_runner = &capture_if_capturing, true);

} // namespace
} // namespace torch_foo

// The CPU fallback as stream-ordered work (FallbackStaged.h): staging copies into pinned memory, a host
// function running the CPU kernel, copies back, results shaped by the meta function. Used by the graph
// capture of the fallback (the graphs answer's capture_runner, Fallback.h) and by the asynchronous eager
// fallback (Fallback.cpp). docs/integration/cpu-fallback.md ("The asynchronous eager fallback" and "Inside a
// graph capture") is the design.
#include "FallbackStaged.h"

#include <cstdint>
#include <limits>
#include <unordered_map>

#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "../core/Device.h"
#include "../core/Exception.h"
#include "../core/HostAllocator.h"
#include "../core/Stream.h"
#include "../runtime/runtime.h"
#include "Copy.h"
#include "SchemaFacts.h"

namespace torch_foo {
namespace {

// The intra-op pool: each worker thread sets its own thread count once, as the autograd engine's
// threads do (with OpenMP, a thread that never did would start a team of one thread per core).
void bound_intra_op_threads() {
  thread_local bool done = false;
  if (!done) {
    at::init_num_threads();
    done = true;
  }
}

} // namespace

void StagedCall::run() {
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

void StagedCall::fill_invalid() {
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

namespace {

// The host function: runs the CPU kernel; a failure cannot raise here and goes to the policy's report.
void run_staged_call(void* data) {
  auto* call = static_cast<StagedCall*>(data);
  try {
    call->run();
  } catch (const std::exception& e) {
    std::string message = "operator " + call->name + " (" + call->policy->where + ") failed: ";
    const auto* error = dynamic_cast<const c10::Error*>(&e);
    message += error != nullptr ? error->what_without_backtrace() : e.what();
    call->policy->report(std::move(message));
    try {
      call->fill_invalid();
    } catch (...) { // nothing can leave a host function
    }
  }
  if (call->policy->release != nullptr) {
    call->policy->release(call);
  }
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

// ---- the meta functions' answers, cached ----------------------------------------------------------

// Many meta functions are Python (torch/_meta_registrations.py registers one for most operators, and
// it takes precedence over the C++ one): about 100 microseconds per call, ten times the CPU kernel
// of a small tensor. Their answer depends only on the arguments' metadata, so each thread keeps the
// answers for the argument signatures it met (meta_key).

// What the meta function said for one signature: its results and the written arguments' meta tensors
// after it ran (both only read afterwards), or why it cannot say.
struct MetaAnswer {
  std::vector<c10::IValue> results;
  std::vector<at::Tensor> written;
  std::string refused;
};

// One thread's answers, forgotten all at once past kMaxAnswers (a program with that many argument
// signatures of fallback operators in flight pays the meta functions again).
class MetaCache {
 public:
  const MetaAnswer* find(const std::string& key) const {
    const auto it = answers_.find(key);
    return it == answers_.end() ? nullptr : &it->second;
  }
  void add(std::string key, MetaAnswer answer) {
    if (answers_.size() >= kMaxAnswers) {
      answers_.clear();
    }
    answers_.emplace(std::move(key), std::move(answer));
  }

 private:
  static constexpr size_t kMaxAnswers = 4096;
  std::unordered_map<std::string, MetaAnswer> answers_;
};

MetaCache& meta_cache() {
  thread_local MetaCache cache;
  return cache;
}

template <typename T>
void append(std::string* key, const T& value) {
  key->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

template <typename List>
void append_list(std::string* key, const List& list) {
  append(key, list.size());
  for (const auto v : list) {
    append(key, static_cast<typename List::value_type>(v));
  }
}

void append_tensor(std::string* key, const at::Tensor& t) {
  append(key, t.defined());
  if (!t.defined()) {
    return;
  }
  append(key, static_cast<int8_t>(t.scalar_type()));
  append(key, static_cast<int8_t>(t.layout()));
  append(key, static_cast<int8_t>(t.device().type()));
  append(key, t.device().index());
  append(key, t.unsafeGetTensorImpl()->is_wrapped_number());
  append(key, t.is_conj());
  append(key, t.is_neg());
  append(key, static_cast<int64_t>(t.dim()));
  if (t.layout() != c10::kStrided) {
    return; // refused by unstageable() before the cache is read
  }
  for (const int64_t size : t.sizes()) {
    append(key, size);
  }
  for (const int64_t stride : t.strides()) {
    append(key, stride);
  }
}

// The signature of a call for the meta function: the operator, the default dtype (which type
// promotion uses for Python numbers), each tensor's metadata and each other argument's value. False
// for arguments it does not know how to write down (a Generator, a Device, a custom class): then the
// meta function runs every time.
bool meta_key(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> arguments, std::string* key) {
  key->clear();
  append(key, &schema);
  key->append(schema.name()); // a schema freed with its library, and another made at its address
  append(key, static_cast<int8_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
  for (const c10::IValue& value : arguments) {
    if (value.isTensor()) {
      key->push_back('T');
      append_tensor(key, value.toTensor());
    } else if (value.isNone()) {
      key->push_back('N');
    } else if (value.isInt()) {
      key->push_back('i');
      append(key, value.toInt());
    } else if (value.isDouble()) {
      key->push_back('d');
      append(key, value.toDouble());
    } else if (value.isBool()) {
      key->push_back('b');
      append(key, value.toBool());
    } else if (value.isComplexDouble()) {
      key->push_back('c');
      append(key, value.toComplexDouble());
    } else if (value.isIntList()) {
      key->push_back('I');
      append_list(key, value.toIntList());
    } else if (value.isDoubleList()) {
      key->push_back('D');
      append_list(key, value.toDoubleList());
    } else if (value.isBoolList()) {
      key->push_back('B');
      append_list(key, value.toBoolList());
    } else if (value.isTensorList()) {
      key->push_back('L');
      const auto list = value.toTensorList();
      append(key, list.size());
      for (const at::Tensor& t : list) {
        append_tensor(key, t);
      }
    } else if (value.isString()) {
      key->push_back('s');
      const auto& text = value.toStringRef();
      append(key, text.size());
      key->append(text);
    } else {
      return false;
    }
  }
  return true;
}

// A device argument as the staged work moves it.
struct Staged {
  at::Tensor argument; // the caller's tensor
  at::Tensor device; // the memory the copies read and write: the argument, or its packed copy
  at::Tensor host; // its pinned staging tensor
  bool written = false;
};

// Why a tensor argument cannot be staged, or an empty string.
std::string unstageable(const at::Tensor& tensor, c10::Device device) {
  if (tensor.layout() != c10::kStrided) {
    return "only strided tensors can be staged, not " + c10::str(tensor.layout());
  }
  if (!tensor.is_cpu() && tensor.device() != device) {
    return "its tensors must be on " + device.str() + ", not " + tensor.device().str();
  }
  return {};
}

// A CPU tensor the operator reads, as the host function will see it: the tensor itself, or (policy
// snapshot_cpu_arguments) a copy taken now, a wrapped number staying one for type promotion.
at::Tensor cpu_argument(const at::Tensor& tensor, const StagingPolicy& policy) {
  if (!policy.snapshot_cpu_arguments) {
    return tensor;
  }
  at::Tensor copy = tensor.clone();
  if (tensor.unsafeGetTensorImpl()->is_wrapped_number()) {
    copy.unsafeGetTensorImpl()->set_wrapped_number(true);
  }
  return copy;
}

// A pinned staging tensor like `t`, marked as used by `stream` when the policy asks.
at::Tensor staging_like(const at::Tensor& t, const StagingPolicy& policy, c10::Stream stream) {
  at::Tensor host = pinned_like(t);
  if (policy.mark_host_use) {
    record_host_use(host.storage().data_ptr(), stream);
  }
  return host;
}

} // namespace

std::optional<std::string> stage_call(
    const c10::OperatorHandle& op,
    torch::jit::Stack* stack,
    c10::DispatchKey cpu_key,
    c10::Device device,
    const StagingPolicy& policy) {
  const OpFacts& facts = facts_for(op);
  const c10::FunctionSchema& schema = op.schema();
  if (!facts.generators.empty() || op.hasTag(at::Tag::nondeterministic_seeded)) {
    return "it draws random numbers, and a replay would repeat the numbers of the capture (docs/graphs.md, Random "
           "numbers)";
  }
  if (meta_disagrees(schema.name())) {
    return "its meta function and its CPU kernel give its auxiliary results (offset2bag, bag_size, max_indices) "
           "different sizes, and the outputs must have their sizes before the CPU kernel runs";
  }
  if (op.hasTag(at::Tag::dynamic_output_shape)) {
    return "the shape of its result depends on the values of its inputs, which are not known before it runs";
  }
  if (!facts.direct && !facts.direct_but_read_lists) {
    return "only operators whose tensor arguments are single tensors or lists it only reads, and whose results are "
           "new tensors or written arguments, can be staged (not written tensor lists, Device arguments or views)";
  }
  for (const int r : facts.returns) {
    if (r == kNoTensor) {
      return "it returns a value that is not a tensor, which the host would need before the operator ran";
    }
  }
  const size_t count = schema.arguments().size();
  const size_t first = stack->size() - count;

  // The meta function gives the results' sizes and strides, and how written arguments would be resized.
  // Its answer for arguments of the same metadata comes from this thread's cache (MetaCache).
  std::string key;
  const bool keyed = meta_key(schema, c10::ArrayRef<c10::IValue>(*stack).slice(first), &key);
  const MetaAnswer* cached = keyed ? meta_cache().find(key) : nullptr;
  torch::jit::Stack meta;
  if (cached == nullptr) {
    meta.assign(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  }
  std::vector<at::Tensor> meta_written(facts.tensors.size());
  for (size_t t = 0; t < facts.tensors.size(); ++t) {
    const c10::IValue& argument = (*stack)[first + facts.tensors[t]];
    if (!argument.isTensor() || !argument.toTensor().defined()) {
      continue;
    }
    const at::Tensor& tensor = argument.toTensor();
    std::string why = unstageable(tensor, device);
    if (!why.empty()) {
      return why;
    }
    if (tensor.is_cpu() && facts.written[t]) {
      return "it writes a CPU tensor, which the staged work would write at a time the host does not know";
    }
    if (cached != nullptr || (tensor.is_cpu() && tensor.dim() == 0)) {
      continue; // a scalar (perhaps a wrapped number, which type promotion treats apart): meta kernels take it
    }
    at::Tensor m = meta_like(tensor);
    if (facts.written[t]) {
      meta_written[t] = m;
    }
    meta[facts.tensors[t]] = c10::IValue(std::move(m));
  }
  for (const size_t position : facts.read_lists) {
    c10::List<at::Tensor> metas;
    for (const at::Tensor& tensor : (*stack)[first + position].toTensorList()) {
      std::string why = unstageable(tensor, device);
      if (!why.empty()) {
        return why;
      }
      if (cached == nullptr) {
        metas.push_back(meta_like(tensor));
      }
    }
    if (cached == nullptr) {
      meta[position] = c10::IValue(std::move(metas));
    }
  }
  if (cached != nullptr) {
    if (!cached->refused.empty()) {
      return cached->refused;
    }
    meta = cached->results;
    meta_written = cached->written;
  } else {
    try {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
    } catch (const c10::NotImplementedError& e) {
      std::string why =
          std::string("it has no meta function to give its results' shapes (") + e.what_without_backtrace() + ")";
      if (keyed) {
        MetaAnswer refused;
        refused.refused = why;
        meta_cache().add(std::move(key), std::move(refused));
      }
      return why;
    }
    if (keyed) {
      MetaAnswer answer;
      answer.results = meta;
      answer.written = meta_written;
      meta_cache().add(std::move(key), std::move(answer));
    }
  }
  TORCH_INTERNAL_ASSERT(meta.size() == facts.returns.size());
  // A written argument the operator resizes: an empty one (what PyTorch's generic kernels pass to
  // out= variants: abs calls abs.out) gets its size now; resizing one that holds values is refused,
  // as a graph's replay could not do it and the eager path would resize it before its values are known.
  for (size_t t = 0; t < facts.tensors.size(); ++t) {
    if (!meta_written[t].defined()) {
      continue;
    }
    const at::Tensor& argument = (*stack)[first + facts.tensors[t]].toTensor();
    if (meta_written[t].sizes() != argument.sizes() && (argument.numel() != 0 || !meta_written[t].is_contiguous())) {
      return "it would resize its written argument (out=) from " + c10::str(argument.sizes()) + " to " +
          c10::str(meta_written[t].sizes()) + ", which staged work cannot do: pass one of the result's size";
    }
  }
  for (size_t t = 0; t < facts.tensors.size(); ++t) {
    if (meta_written[t].defined() && meta_written[t].sizes() != (*stack)[first + facts.tensors[t]].toTensor().sizes()) {
      (*stack)[first + facts.tensors[t]].toTensor().resize_(meta_written[t].sizes());
    }
  }

  // Nothing is enqueued before this point. The policy owns the call from here on, so that work
  // enqueued before a failure below never uses freed memory.
  auto call = std::make_shared<StagedCall>(op, cpu_key, policy);
  call->name = schema.overload_name().empty() ? schema.name() : schema.name() + "." + schema.overload_name();
  call->arguments.assign(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  call->results.resize(facts.returns.size());
  StagedCall* staged_call = call.get();
  policy.keep(call);
  call.reset();
  bool launched = false;
  try {
    const c10::DeviceGuard guard(device);
    const c10::Stream current = current_stream(device.index());
    fooStream_t stream = current_stream_on(device.index());
    std::vector<Staged> staged(facts.tensors.size());
    for (size_t t = 0; t < facts.tensors.size(); ++t) {
      c10::IValue& value = staged_call->arguments[facts.tensors[t]];
      if (!value.isTensor() || !value.toTensor().defined()) {
        continue; // None or undefined
      }
      if (!value.toTensor().is_privateuseone()) {
        value = c10::IValue(cpu_argument(value.toTensor(), policy)); // a CPU tensor the kernel reads
        continue;
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
        // Packed on the device (a copy in stream order) when its elements do not fill their memory.
        s.device =
            copies_in_one_transfer(s.argument) ? s.argument : s.argument.resolve_conj().resolve_neg().contiguous();
        s.host = staging_like(s.device, policy, current);
        copy_async(s.host.data_ptr(), s.device.const_data_ptr(), span_bytes(s.device), /*to_device=*/false, stream);
      }
      at::Tensor host = s.host;
      if (!s.written && s.argument.requires_grad()) { // as host_argument() in Fallback.cpp
        host = s.host.detach();
        host.set_requires_grad(true);
      }
      if (s.written) {
        staged_call->written.push_back(s.host);
      }
      value = c10::IValue(std::move(host));
    }

    // The elements of read-only lists: staged like single arguments that are read; CPU elements stay.
    for (const size_t position : facts.read_lists) {
      c10::IValue& value = staged_call->arguments[position];
      c10::List<at::Tensor> hosts;
      for (const at::Tensor& element : value.toTensorList()) {
        if (!element.is_privateuseone()) {
          hosts.push_back(cpu_argument(element, policy));
          continue;
        }
        const at::Tensor packed =
            copies_in_one_transfer(element) ? element : element.resolve_conj().resolve_neg().contiguous();
        at::Tensor host = staging_like(packed, policy, current);
        copy_async(host.data_ptr(), packed.const_data_ptr(), span_bytes(packed), /*to_device=*/false, stream);
        hosts.push_back(std::move(host));
      }
      value = c10::IValue(std::move(hosts));
    }

    // The results: device memory (a graph's: from its pool) and a staging tensor each.
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
      staged_call->results[r] = staging_like(shape, policy, current);
      returned[r] = c10::IValue(at::empty_strided(shape.sizes(), shape.strides(), shape.options().device(device)));
    }

    FOO_CHECK(fooLaunchHostFunc(stream, &run_staged_call, staged_call));
    launched = true;
    for (size_t r = 0; r < returned.size(); ++r) {
      if (staged_call->results[r].defined()) {
        const at::Tensor& out = returned[r].toTensor();
        copy_async(
            out.data_ptr(), staged_call->results[r].const_data_ptr(), span_bytes(out), /*to_device=*/true, stream);
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
  } catch (...) {
    if (policy.release != nullptr) {
      if (!launched) {
        policy.release(staged_call); // the host function will not run: its release too
      }
      policy.release(staged_call);
    }
    throw;
  }
  if (policy.release != nullptr) {
    policy.release(staged_call); // everything that reads the call's memory is enqueued
  }
  return std::nullopt;
}

} // namespace torch_foo

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
#include "Fallback.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/_copy_from_and_resize.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include "../core/Device.h"
#include "../core/Generator.h"
#include "../families/WiderDtypes.h"
#include "Copy.h"

namespace torch_foo {
namespace {

bool warn_on_fallback() {
  static const bool enabled = [] {
    const char* env = std::getenv("FOO_WARN_FALLBACK");
    return env != nullptr && env[0] != '\0' && env[0] != '0';
  }();
  return enabled;
}

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

bool is_generator(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) {
    return type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
  }
  return type->kind() == c10::TypeKind::GeneratorType;
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
void seed_cpu_generators(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema().arguments();
  const size_t first = stack->size() - schema.size();
  for (size_t i = 0; i < schema.size(); ++i) {
    if (!is_generator(schema[i].type())) {
      continue;
    }
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

// What the fallback needs to know about an operator's schema on every call, worked out on its
// first call (parsing the schema's types and alias sets again each time costs as much as the copies
// of small tensors).
struct OpFacts {
  explicit OpFacts(c10::OperatorName n) : name(std::move(n)) {}

  c10::OperatorName name;
  bool has_generator = false; // seed_cpu_generators has work
  // Every tensor argument is a single Tensor (no lists), there is no Device argument, and every
  // return is a new tensor, a written argument or not a tensor: run_direct() handles the call.
  bool direct = true;
  std::vector<size_t> tensors; // positions of the Tensor arguments
  std::vector<bool> written; // for each of them: the operator writes it (in place, out=)
  std::vector<int> returns; // for each return: the entry of `tensors` it is, kNewTensor or kNoTensor
};

constexpr int kNewTensor = -1;
constexpr int kNoTensor = -2;

bool is_tensor_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) {
    return type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType;
  }
  return type->kind() == c10::TypeKind::TensorType;
}

// True when a schema type holds tensors in another form than a single Tensor (lists, tuples) or is
// a device (which the general path replaces by the CPU).
bool needs_general_path(const c10::TypePtr& type) {
  if (is_tensor_type(type)) {
    return false;
  }
  if (type->kind() == c10::TypeKind::DeviceObjType) {
    return true;
  }
  for (const auto& contained : type->containedTypes()) {
    if (is_tensor_type(contained) || contained->kind() == c10::TypeKind::DeviceObjType ||
        needs_general_path(contained)) { // Tensor[], Tensor?[], (Tensor, ...) ...
      return true;
    }
  }
  return false;
}

std::unique_ptr<OpFacts> facts_of(const c10::FunctionSchema& schema) {
  auto facts = std::make_unique<OpFacts>(schema.operator_name());
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto& type = arguments[i].type();
    facts->has_generator = facts->has_generator || is_generator(type);
    if (is_tensor_type(type)) {
      facts->tensors.push_back(i);
      const auto* alias = arguments[i].alias_info();
      facts->written.push_back(alias != nullptr && alias->isWrite());
    } else if (needs_general_path(type)) {
      facts->direct = false;
    }
  }
  for (const auto& r : schema.returns()) {
    const auto* alias = r.alias_info();
    if (!is_tensor_type(r.type())) {
      facts->direct = facts->direct && !needs_general_path(r.type()) && alias == nullptr;
      facts->returns.push_back(kNoTensor);
    } else if (alias == nullptr) {
      facts->returns.push_back(kNewTensor);
    } else if (!alias->isWrite()) {
      facts->direct = false; // a view: the general path warns
      facts->returns.push_back(kNoTensor);
    } else {
      int found = kNoTensor; // the written argument with the same alias set
      for (size_t t = 0; t < facts->tensors.size() && found == kNoTensor; ++t) {
        const auto* input = arguments[facts->tensors[t]].alias_info();
        if (input != nullptr && (input == alias || *input == *alias)) {
          found = static_cast<int>(t);
        }
      }
      facts->direct = facts->direct && found != kNoTensor;
      facts->returns.push_back(found);
    }
  }
  return facts;
}

// Every operator's facts, by the address of its schema. Facts are never destroyed while the process
// runs: a caller keeps a reference to them for the whole call, so a second thread that worked out the
// same facts concurrently keeps the first ones, and an entry whose schema was freed with its library
// (another schema now at that address) moves to `retired` instead of being deleted. The table itself
// is never destroyed either (a thread still inside an operator while the process exits must not find
// it torn down by static destructors). The names of the operators seen so far (fallback_ops()) live
// here for the same reason.
struct FactsTable {
  std::shared_mutex mutex;
  std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpFacts>> by_schema;
  std::vector<std::unique_ptr<OpFacts>> retired;
  std::mutex seen_mutex;
  std::unordered_set<c10::OperatorName> seen;
};

FactsTable& facts_table() {
  static auto* table = new FactsTable();
  return *table;
}

// The facts of `op`, made on its first call (which is also when it joins fallback_ops()).
const OpFacts& facts_for(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  FactsTable& table = facts_table();
  {
    std::shared_lock<std::shared_mutex> lock(table.mutex);
    const auto it = table.by_schema.find(&schema);
    // The name guards against a schema freed with its library and another one made at its address.
    if (it != table.by_schema.end() && it->second->name == schema.operator_name()) {
      return *it->second;
    }
  }
  auto facts = facts_of(schema);
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(table.seen_mutex);
    first = table.seen.insert(facts->name).second;
  }
  if (first && warn_on_fallback()) {
    TORCH_WARN("foo: ", facts->name, " has no foo kernel and runs on the CPU fallback");
  }
  std::unique_lock<std::shared_mutex> lock(table.mutex);
  auto [it, inserted] = table.by_schema.try_emplace(&schema);
  if (!inserted) {
    if (it->second->name == facts->name) {
      return *it->second; // another thread got here first, and its caller may be using them
    }
    table.retired.push_back(std::move(it->second));
  }
  it->second = std::move(facts);
  return *it->second;
}

// A tensor argument that run_direct() copies with one transfer each way.
bool plain_device_tensor(const at::Tensor& t) {
  return t.is_privateuseone() && t.layout() == c10::kStrided && !t.is_conj() && !t.is_neg() &&
      t.is_non_overlapping_and_dense();
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
      const bool plain = result.layout() == c10::kStrided && !result.is_conj() && !result.is_neg() &&
          result.is_non_overlapping_and_dense();
      value = c10::IValue(plain ? device_copy(result, device) : result.to(device));
    }
  }
  return true;
}

} // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpu_fallback_for(op, stack, c10::DispatchKey::CPU);
}

void cpu_fallback_for(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  check_same_device(op, *stack);
  const OpFacts& facts = facts_for(op);
  if (facts.has_generator) {
    seed_cpu_generators(op, stack);
  }
  // Profilers see the operator, not the dozen it runs here (copies to the CPU and back, the CPU
  // kernel): its copies are attributed to it, and profiling a model that falls back costs what it
  // costs on the CPU instead of several times more (benchmarks/bench_profiler.py). Without a
  // profiler (no callbacks) there is nothing to hide, and switching costs more than a small copy.
  std::optional<at::DisableRecordFunctionGuard> record_only_the_operator;
  if (at::hasCallbacks()) {
    record_only_the_operator.emplace();
  }
  if (cpu_key == c10::DispatchKey::CPU && run_widened(op, stack)) {
    return; // a dtype that CUDA supports and the CPU kernel does not
  }
  if (run_direct(facts, op, stack, cpu_key)) {
    return;
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false, cpu_key);
}

void route_structured_ops_to_fallback() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked on purpose: the registrations must outlive static destruction. Held by a static, so that
    // LeakSanitizer sees it reachable rather than lost.
    static auto* library =
        new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    auto& dispatcher = c10::Dispatcher::singleton();
    auto names = dispatcher.getAllOpNamesForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
    const size_t structured = names.size();
    const auto generic = dispatcher.getAllOpNamesForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
    names.insert(names.end(), generic.begin(), generic.end());
    // Decompositions that a backend's own kernel replaces (mish_backward, silu_backward): the CPU and
    // CUDA run their kernel, which rounds once; the decomposition would round after every step.
    const auto implicit = dispatcher.getAllOpNamesForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
    names.insert(names.end(), implicit.begin(), implicit.end());
    for (size_t i = 0; i < names.size(); ++i) {
      const auto& name = names[i];
      const auto op = dispatcher.findOp(name);
      if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
        continue; // a native kernel exists
      }
      if (i >= structured && !op->hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
        continue; // a generic kernel without a CPU counterpart: keep it
      }
      const auto& returns = op->schema().returns();
      const bool returns_view = std::any_of(returns.begin(), returns.end(), [](const c10::Argument& r) {
        return r.alias_info() != nullptr && !r.alias_info()->isWrite();
      });
      if (returns_view) {
        continue; // the fallback would return a copy where a view is expected
      }
      if (op->hasTag(at::Tag::inplace_view)) {
        // as_strided_, transpose_, unsqueeze_: they change the tensor's metadata only, which the generic
        // kernel does for any device. Run on a CPU copy, as_strided_ could not reach the storage around
        // a view, and its storage offset would count from the copy's start.
        continue;
      }
      const std::string qualified = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
      library->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
    }
    // Generic kernels that call a DispatchStub, which has kernels for the CPU and CUDA only: on the
    // device they would fail with "DispatchStub: missing kernel". The dispatcher cannot tell them from
    // the generic kernels that work on any device; tests/test_tensors.py's sweep of factory keywords
    // finds them.
    for (const char* factory : {"kaiser_window", "kaiser_window.periodic", "kaiser_window.beta"}) {
      library->impl(factory, torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
    }
  });
}

std::vector<std::string> fallback_ops() {
  std::vector<std::string> names;
  FactsTable& table = facts_table();
  {
    std::lock_guard<std::mutex> lock(table.seen_mutex);
    for (const auto& name : table.seen) {
      names.push_back(c10::toString(name));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

} // namespace torch_foo

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
#include <mutex>
#include <optional>
#include <unordered_set>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include "../core/Device.h"
#include "../core/Generator.h"
#include "WiderDtypes.h"

namespace torch_foo {
namespace {

std::mutex seen_mutex;
std::unordered_set<c10::OperatorName> seen_ops;

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

} // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpu_fallback_for(op, stack, c10::DispatchKey::CPU);
}

void cpu_fallback_for(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  check_same_device(op, *stack);
  const c10::OperatorName& name = op.schema().operator_name();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(seen_mutex);
    first = seen_ops.insert(name).second;
  }
  if (first && warn_on_fallback()) {
    TORCH_WARN("foo: ", name, " has no foo kernel and runs on the CPU fallback");
  }
  seed_cpu_generators(op, stack);
  // Profilers see the operator, not the dozen it runs here (copies to the CPU and back, the CPU
  // kernel): its copies are attributed to it, and profiling a model that falls back costs what it
  // costs on the CPU instead of several times more (benchmarks/bench_profiler.py).
  const at::DisableRecordFunctionGuard record_only_the_operator;
  if (cpu_key == c10::DispatchKey::CPU && run_widened(op, stack)) {
    return; // a dtype that CUDA supports and the CPU kernel does not
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
  });
}

std::vector<std::string> fallback_ops() {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(seen_mutex);
    for (const auto& name : seen_ops) {
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

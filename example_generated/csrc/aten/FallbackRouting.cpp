// Which operators go to the CPU fallback although PyTorch has a generic kernel for them:
// route_structured_ops_to_fallback() (Fallback.h says which and why). It runs once, when the Python
// module loads, after every kernel of this library is registered.
#include <algorithm>
#include <mutex>
#include <string>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "Fallback.h"

namespace torch_foo {

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

} // namespace torch_foo

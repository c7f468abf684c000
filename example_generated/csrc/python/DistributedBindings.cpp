// The bindings of the c10d backend (the distributed answer): csrc/distributed/Backend.cpp binds its
// constructor, torch_foo/distributed.py calls it.
#include "../distributed/Bindings.h"
#include "Bindings.h"

namespace torch_foo {
namespace {

void bind_distributed(pybind11::module_& m) {
  torch_foo::distributed::add_bindings(m.ptr());
}

FeatureBindings distributed_bindings("distributed", &bind_distributed);

} // namespace
} // namespace torch_foo

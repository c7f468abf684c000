// The bindings of graphs (the graphs answer): torch_foo/graphs.py; torch.accelerator.Graph itself is
// csrc/core/Graph.cpp.
#include "../core/DeviceAllocator.h"
#include "../core/Exception.h"
#include "../core/Stream.h"
#include "Bindings.h"

namespace torch_foo {
namespace {

void bind_graphs(pybind11::module_& m) {
  m.def("_graph_pool_handle", [] {
    const c10::MempoolId_t id = new_pool_id(/*for_graph=*/false);
    return pybind11::make_tuple(id.first, id.second);
  });
  m.def("_is_current_stream_capturing", [] {
    fooStreamCaptureStatus status = fooStreamCaptureStatusNone;
    FOO_CHECK(fooStreamIsCapturing(current_stream(), &status));
    return status != fooStreamCaptureStatusNone;
  });
}

FeatureBindings graph_bindings("graphs", &bind_graphs);

} // namespace
} // namespace torch_foo

// Entry points: stream capture and graphs. The rules a port keeps: argument checks, the fork state,
// a NULL stream is the default stream of the current device, and launches are traced.
#include "driver.h"
#include "internal.h"
#include "tracing_records.h"

using namespace torch_foo;
using namespace torch_foo::runtime;

namespace {

fooError_t enter_stream(fooStream_t* stream) {
  if (forked()) {
    return forked_child();
  }
  return resolve_stream(stream);
}

fooError_t null_handle(const char* what) {
  return fail(fooErrorInvalidResourceHandle, "a NULL %s", what);
}

} // namespace

extern "C" {

fooError_t fooStreamBeginCapture(fooStream_t stream, fooStreamCaptureMode mode) {
  if (mode != fooStreamCaptureModeGlobal && mode != fooStreamCaptureModeThreadLocal &&
      mode != fooStreamCaptureModeRelaxed) {
    return result(fail(fooErrorInvalidValue, "unknown capture mode %d", static_cast<int>(mode)));
  }
  if (const auto err = enter_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::stream_begin_capture(stream, mode));
}

fooError_t fooStreamEndCapture(fooStream_t stream, fooGraph_t* graph) {
  if (graph == nullptr) {
    return result(null_argument("graph"));
  }
  *graph = nullptr;
  if (const auto err = enter_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::stream_end_capture(stream, graph));
}

fooError_t fooStreamIsCapturing(fooStream_t stream, fooStreamCaptureStatus* status) {
  return fooStreamGetCaptureInfo(stream, status, nullptr);
}

fooError_t fooStreamGetCaptureInfo(
    fooStream_t stream, fooStreamCaptureStatus* captureStatus, unsigned long long* captureId) {
  if (captureStatus == nullptr) {
    return result(null_argument("captureStatus"));
  }
  if (const auto err = enter_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  unsigned long long ignored = 0;
  return result(driver::stream_capture_info(stream, captureStatus, captureId != nullptr ? captureId : &ignored));
}

fooError_t fooGraphGetNodeCount(fooGraph_t graph, size_t* count) {
  if (count == nullptr) {
    return result(null_argument("count"));
  }
  if (graph == nullptr) {
    return result(null_handle("graph"));
  }
  return result(driver::graph_node_count(graph, count));
}

fooError_t fooGraphInstantiate(fooGraphExec_t* exec, fooGraph_t graph) {
  if (exec == nullptr) {
    return result(null_argument("exec"));
  }
  if (graph == nullptr) {
    return result(null_handle("graph"));
  }
  if (forked()) {
    return result(forked_child());
  }
  return result(driver::graph_instantiate(graph, exec));
}

fooError_t fooGraphLaunch(fooGraphExec_t exec, fooStream_t stream) {
  if (exec == nullptr) {
    return result(null_handle("executable graph"));
  }
  if (forked()) {
    return result(forked_child());
  }
  const tracing::ApiScope trace("fooGraphLaunch");
  if (const auto err = resolve_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  return result(driver::graph_launch(exec, stream));
}

fooError_t fooGraphDestroy(fooGraph_t graph) {
  if (graph == nullptr) {
    return result(null_handle("graph"));
  }
  return result(driver::graph_destroy(graph));
}

fooError_t fooGraphExecDestroy(fooGraphExec_t exec) {
  if (exec == nullptr) {
    return result(null_handle("executable graph"));
  }
  return result(driver::graph_exec_destroy(exec));
}

fooError_t fooGraphDebugDotPrint(fooGraph_t graph, const char* path) {
  if (path == nullptr) {
    return result(null_argument("path"));
  }
  if (graph == nullptr) {
    return result(null_handle("graph"));
  }
  return result(driver::graph_debug_dot_print(graph, path));
}

} // extern "C"

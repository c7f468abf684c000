// Graphs and the CPU fallback (the graphs answer): an operator the fallback would run cannot be
// captured, since the fallback copies its tensors to the host and waits for the device. The check
// fills the fallback's seam (Fallback.h).
#include <string>

#include <ATen/core/dispatch/Dispatcher.h>

#include "../core/Device.h"
#include "../core/Graph.h"
#include "Fallback.h"

namespace torch_foo {
namespace {

void check_fallback_not_capturing(const c10::OperatorHandle& op) {
  graphs::check_not_capturing(
      current_device(),
      "operator " + op.schema().operator_name().name + " (it has no foo kernel: the CPU fallback runs it)",
      "the fallback copies its tensors to the host and waits for the device");
}

const FallbackExtension capture_check("graphs", &check_fallback_not_capturing, nullptr, nullptr);

} // namespace
} // namespace torch_foo

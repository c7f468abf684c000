// Graphs: torch.accelerator.Graph (and torch.foo.graph) for the device, over the runtime's
// stream capture (fooStreamBeginCapture ... fooGraphLaunch). Graph.cpp registers the
// implementation of at::GraphImplInterface; this header is what the rest of the extension asks.
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace torch_foo::graphs {

// Raises if the current stream of `device` captures a graph: `what` cannot be recorded into one,
// because `why`. Costs one atomic load while no graph captures.
void check_not_capturing(c10::DeviceIndex device, const std::string& what, const char* why);

} // namespace torch_foo::graphs

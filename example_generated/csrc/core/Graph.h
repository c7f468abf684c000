// Graph capture, as the rest of the extension asks about it: work that cannot be recorded into a
// graph checks that no capture records it. Streams capture only in a build with graph capture
// (the graphs feature), whose file installs the check when it is loaded; without it, the check is
// the load of a null pointer.
#pragma once

#include <string>

#include <c10/core/Device.h>
#include <c10/macros/Macros.h>

namespace torch_foo::graphs {

using NotCapturingCheck = void (*)(c10::DeviceIndex device, const std::string& what, const char* why);

// The check check_not_capturing() runs; set once, while the extension loads, by graph capture.
inline NotCapturingCheck not_capturing_check = nullptr;

// Raises if the current stream of `device` captures a graph: `what` cannot be recorded into one,
// because `why`. While no graph captures, it costs a call and an atomic load with graph capture,
// and the load of a null pointer without.
inline void check_not_capturing(c10::DeviceIndex device, const std::string& what, const char* why) {
  if (C10_UNLIKELY(not_capturing_check != nullptr)) {
    not_capturing_check(device, what, why);
  }
}

} // namespace torch_foo::graphs

// Graph capture, as the rest of the extension asks about it: work that cannot be recorded into a
// graph checks that no capture records it. Streams capture only in a build with graph capture
// (the graphs feature), whose file installs the check when it is loaded; without it, the check is
// the load of a null pointer.
#pragma once

#include <memory>
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

// ---- work recorded by other layers (defined with graph capture only) -----------------------------
// The CPU fallback records an operator into a capture with these (the graphs answer).

// True if the current stream of `device` captures, with the capture's id in *capture (the runtime's
// fooStreamGetCaptureInfo). While no graph captures, an atomic load.
bool capturing_on(c10::DeviceIndex device, unsigned long long* capture);

// Keeps `data` alive as long as the graph capturing `capture` may run: until the graph is reset (or
// destroyed) and the last launch of its executable graphs has finished. Host functions recorded into
// the capture may read and write it at every replay; it is freed on the thread that resets the graph,
// never on a stream's worker. Raises if no graph of this process records `capture`.
void keep_alive(unsigned long long capture, std::shared_ptr<void> data);

// Records the failure of recorded work that ran on a stream's worker (a captured fallback operator
// whose CPU kernel raised during a replay), where nothing can raise: the next replay() of a graph
// raises it. Only the first failure is kept until then.
void report_replay_error(std::string message);

} // namespace torch_foo::graphs

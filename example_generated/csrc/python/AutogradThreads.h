// Interpreter exit and torch's autograd device threads: see AutogradThreads.cpp.
#pragma once

#include <c10/core/Device.h>

namespace torch_foo {

// Waits until the autograd thread of `device` has finished every backward pass it was given, so that
// it holds none when the interpreter finalizes. Called with the GIL held; releases it while it waits.
void finish_autograd_device_thread(c10::DeviceIndex device);

} // namespace torch_foo

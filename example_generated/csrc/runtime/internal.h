// Process state shared by the runtime's entry points (api_*.cpp), and the error-message helper the
// device layer uses too. Kept by a hardware port: none of it is about the device.
#pragma once

#include "runtime.h"

namespace torch_foo::runtime {

// Describes the failure the current call is about to return (printf-style) and returns `code`.
fooError_t fail(fooError_t code, const char* format, ...) __attribute__((format(printf, 2, 3)));

// What every entry point returns through: for a failure (other than fooErrorNotReady, which is an
// answer), makes the description given to fail() during this call, or else the code's own string,
// the thread's fooGetLastErrorMessage().
fooError_t result(fooError_t code);

// True in a child forked after the runtime was initialised: it must not touch devices.
bool forked();

// Initialises the runtime once (driver::initialize()), on the first call that touches a device.
void ensure_initialized();

// The current device of the calling thread.
int current_device();
void set_current_device(int device);
bool valid_device(int device);

// Marks `device` as used by this process (fooDeviceIsInitialized), initialising the runtime.
void use_device(int device);
bool device_used(int device);

// Failures every entry point reports the same way (each calls fail() and returns the code).
fooError_t null_argument(const char* name);
fooError_t forked_child();
fooError_t bad_device(int device); // fooErrorNoDevice when there are none

// A NULL stream becomes the default stream of the current device (initialising it).
fooError_t resolve_stream(fooStream_t* stream);

} // namespace torch_foo::runtime

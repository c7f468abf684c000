// Entry points: errors, versions, devices, peer access, and the process state every other entry
// point relies on (lazy initialisation, fork state, the per-thread current device, error messages).
// A hardware port keeps this file: the device itself is reached through driver.h.
#include <pthread.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "driver.h"
#include "internal.h"

namespace torch_foo::runtime {
namespace {

std::atomic<bool> initialized{false}; // the driver's initialisation has begun (work may exist)
std::atomic<bool> ready{false}; // ... and has finished: every thread may use the driver
std::atomic<bool> bad_fork{false}; // this process is a child forked after initialisation
std::atomic<bool> device_in_use[FOO_MAX_DEVICES];
thread_local int current = 0;

// Error messages: fail() describes the failure of the call in progress; result() publishes it.
constexpr size_t kMessageBytes = 1024;
thread_local char pending[kMessageBytes];
thread_local bool has_pending = false;
thread_local char last[kMessageBytes];

// Runs in the child after fork(). Worker threads do not survive a fork and the state they guard
// may be mid-update, so a child of an initialised process must not touch the runtime.
void on_fork_child() {
  if (initialized.load()) {
    bad_fork.store(true);
  }
}

const bool fork_handler_registered = [] { return pthread_atfork(nullptr, nullptr, &on_fork_child) == 0; }();

} // namespace

fooError_t fail(fooError_t code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(pending, sizeof(pending), format, args);
  va_end(args);
  has_pending = true;
  return code;
}

fooError_t result(fooError_t code) {
  if (code != fooSuccess && code != fooErrorNotReady) {
    if (has_pending) {
      std::memcpy(last, pending, sizeof(last));
    } else {
      std::snprintf(last, sizeof(last), "%s", fooGetErrorString(code));
    }
  }
  has_pending = false;
  return code;
}

bool forked() {
  return bad_fork.load(std::memory_order_relaxed);
}

void ensure_initialized() {
  static std::once_flag once;
  if (ready.load(std::memory_order_acquire)) {
    return;
  }
  // Threads whose first calls race wait here until the first has initialised the driver: one that
  // went on as soon as initialisation began could allocate from a half-made address space.
  std::call_once(once, [] {
    initialized.store(true); // first, so that a fork from now on makes a bad child
    driver::initialize();
    ready.store(true, std::memory_order_release);
  });
}

int current_device() {
  return current;
}

void set_current_device(int device) {
  current = device;
}

bool valid_device(int device) {
  return device >= 0 && device < driver::device_count();
}

void use_device(int device) {
  ensure_initialized();
  device_in_use[device].store(true, std::memory_order_relaxed);
}

bool device_used(int device) {
  return device_in_use[device].load(std::memory_order_relaxed);
}

fooError_t null_argument(const char* name) {
  return fail(fooErrorInvalidValue, "%s must not be NULL", name);
}

fooError_t forked_child() {
  return fail(fooErrorForkedAfterInit, "%s", fooGetErrorString(fooErrorForkedAfterInit));
}

fooError_t bad_device(int device) {
  const int count = driver::device_count();
  if (count == 0) {
    return fail(fooErrorNoDevice, "no foo device is available");
  }
  return fail(fooErrorInvalidDevice, "device %d does not exist (the process has %d devices)", device, count);
}

fooError_t resolve_stream(fooStream_t* stream) {
  if (*stream != nullptr) {
    return fooSuccess;
  }
  const int device = current;
  if (!valid_device(device)) {
    return bad_device(device);
  }
  use_device(device);
  *stream = driver::default_stream(device);
  return fooSuccess;
}

} // namespace torch_foo::runtime

using namespace torch_foo;
using namespace torch_foo::runtime;

extern "C" {

const char* fooGetErrorString(fooError_t error) {
  switch (error) {
    case fooSuccess: return "no error";
    case fooErrorInvalidValue: return "invalid argument";
    case fooErrorInvalidDevice: return "invalid device ordinal";
    case fooErrorMemoryAllocation: return "out of memory";
    case fooErrorInvalidDevicePointer: return "invalid device pointer";
    case fooErrorInvalidResourceHandle: return "invalid resource handle";
    case fooErrorNotReady: return "device not ready";
    case fooErrorNoDevice: return "no foo device is available";
    case fooErrorLaunchFailure: return "a kernel failed";
    case fooErrorNotPermitted:
      return "operation not permitted from work running on a stream (it would wait for itself)";
    case fooErrorForkedAfterInit:
      return "the foo runtime cannot be used in a process forked after it was initialised; use the 'spawn' "
             "start method (multiprocessing.set_start_method('spawn'), or multiprocessing_context='spawn' for a "
             "DataLoader)";
    case fooErrorNotSupported: return "operation not supported by this device";
    case fooErrorNotFound: return "named module or kernel not found";
    case fooErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case fooErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case fooErrorStreamCaptureUnjoined: return "capture was not joined back to its origin stream";
    case fooErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
    case fooErrorInvalidKernelImage: return "device kernel image is invalid";
    case fooErrorUnknown: return "unknown driver error";
  }
  return "unknown error code";
}

const char* fooGetLastErrorMessage(void) {
  return runtime::last;
}

fooError_t fooRuntimeGetVersion(int* version) {
  if (version == nullptr) {
    return result(null_argument("version"));
  }
  *version = FOO_RUNTIME_VERSION;
  return result(fooSuccess);
}

fooError_t fooDriverGetVersion(int* version) {
  if (version == nullptr) {
    return result(null_argument("version"));
  }
  *version = driver::version();
  return result(fooSuccess);
}

fooError_t fooGetDeviceCount(int* count) {
  if (count == nullptr) {
    return result(null_argument("count"));
  }
  *count = driver::device_count();
  return result(fooSuccess);
}

fooError_t fooGetDevice(int* device) {
  if (device == nullptr) {
    return result(null_argument("device"));
  }
  if (runtime::forked()) {
    return result(forked_child());
  }
  if (driver::device_count() == 0) {
    return result(bad_device(0));
  }
  *device = runtime::current_device();
  return result(fooSuccess);
}

fooError_t fooSetDevice(int device) {
  if (runtime::forked()) {
    return result(forked_child());
  }
  if (!runtime::valid_device(device)) {
    return result(bad_device(device));
  }
  runtime::set_current_device(device);
  return result(fooSuccess);
}

fooError_t fooGetDeviceProperties(fooDeviceProp* prop, int device) {
  if (prop == nullptr) {
    return result(null_argument("prop"));
  }
  if (!runtime::valid_device(device)) {
    return result(bad_device(device));
  }
  return result(driver::device_properties(device, prop));
}

fooError_t fooDeviceIsInitialized(int device, int* initialized) {
  if (initialized == nullptr) {
    return result(null_argument("initialized"));
  }
  if (runtime::forked()) {
    return result(forked_child());
  }
  if (!runtime::valid_device(device)) {
    return result(bad_device(device));
  }
  *initialized = runtime::device_used(device) ? 1 : 0;
  return result(fooSuccess);
}

fooError_t fooDeviceSynchronize(void) {
  if (runtime::forked()) {
    return result(forked_child());
  }
  const int device = runtime::current_device();
  if (!runtime::valid_device(device)) {
    return result(bad_device(device));
  }
  if (!runtime::device_used(device)) {
    return result(fooSuccess); // nothing was ever queued on it
  }
  return result(driver::device_synchronize(device));
}

fooError_t fooDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  if (canAccessPeer == nullptr) {
    return result(null_argument("canAccessPeer"));
  }
  if (runtime::forked()) {
    return result(forked_child());
  }
  if (!runtime::valid_device(device)) {
    return result(bad_device(device));
  }
  if (!runtime::valid_device(peerDevice)) {
    return result(bad_device(peerDevice));
  }
  *canAccessPeer = device != peerDevice && driver::can_access_peer(device, peerDevice) ? 1 : 0;
  return result(fooSuccess);
}

fooError_t fooDeviceGetNativeHandle(int device, void** native, void** context) {
  if (native == nullptr || context == nullptr) {
    return result(null_argument(native == nullptr ? "native" : "context"));
  }
  if (runtime::forked()) {
    return result(forked_child());
  }
  if (!runtime::valid_device(device)) {
    return result(bad_device(device));
  }
  use_device(device); // the handles are for work on the device: they exist once it is initialised
  return result(driver::device_native_handle(device, native, context));
}

fooError_t fooIsInBadFork(int* bad) {
  if (bad == nullptr) {
    return result(null_argument("bad_fork"));
  }
  *bad = runtime::forked() ? 1 : 0;
  return result(fooSuccess);
}

} // extern "C"

// Devices of the emulated foo device: how many, what they report, peer access, and process
// start-up.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "../internal.h"
#include "emulated.h"

namespace torch_foo::emulated {
namespace {

// At process exit, before the static destructors registered before initialisation (PyTorch's,
// OpenMP's) run: finishes the work queued so far, then stops the workers (streams.cpp, Lifetime),
// so that no kernel runs while the libraries it calls are torn down, whatever other threads still
// queue. A child forked after initialisation has no workers (threads do not survive fork()) and
// its queues and locks are as the fork left them: it waits for nothing.
void drain_at_exit() {
  if (runtime::forked() || worker_stream() != nullptr) {
    return;
  }
  wait_all_devices();
  stop_workers();
  wait_all_devices(); // the tasks that were running when the workers stopped
}

} // namespace
} // namespace torch_foo::emulated

namespace torch_foo::driver {

using namespace emulated;

int device_count() {
  return config().device_count;
}

fooError_t device_properties(int device, fooDeviceProp* prop) {
  std::memset(prop, 0, sizeof(*prop));
  const std::string name = "Emulated foo device " + std::to_string(device);
  std::strncpy(prop->name, name.c_str(), sizeof(prop->name) - 1);
  prop->totalGlobalMem = config().capacity;
  prop->multiProcessorCount = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  prop->maxThreadsPerBlock = kMaxThreadsPerBlock;
  prop->sharedMemPerBlock = kSharedMemPerBlock;
  prop->major = 1;
  prop->minor = 0;
  // Device memory is host memory, except in strict memory mode, which keeps the host out of it.
  prop->hostAccessesDeviceMemory = config().strict ? 0 : 1;
  return fooSuccess;
}

void initialize() {
  initialize_memory();
  std::atexit(&drain_at_exit);
}

// Devices share the host's address space, so each can address every other's memory.
bool can_access_peer(int /*device*/, int /*peer*/) {
  return true;
}

int version() {
  return FOO_RUNTIME_VERSION; // the emulation is its own driver
}

// [tracing] The host's monotonic clock: deliberately not the wall clock PyTorch's profiler uses, so
// that the conversion a hardware device needs (its clock to the host's) is exercised here too.
uint64_t timestamp() {
  return static_cast<uint64_t>(now_ns());
}

} // namespace torch_foo::driver

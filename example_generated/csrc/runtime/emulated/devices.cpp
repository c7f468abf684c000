// Devices of the emulated foo device: how many, what they report, and process start-up.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "emulated.h"

namespace torch_foo::emulated {
namespace {

// Lets queued work finish before static destructors run: kernels call into libraries (PyTorch's
// CPU operators, OpenMP) whose own static state is torn down at exit.
void drain_at_exit() {
  if (worker_stream() == nullptr) {
    wait_all_devices();
  }
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
  return fooSuccess;
}

void initialize() {
  initialize_memory();
  std::atexit(&drain_at_exit);
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

// Native handles and vendor-library work on the emulated foo device. There is no vendor API
// behind the emulation, so no device handle; a device address maps to the allocation that holds it
// (the "buffer") and its offset there; native work is a task of its stream, which its worker runs in
// order: fn(NULL, args), with the arguments copied into the task as a kernel's parameter block is.
// fn reaches device memory at fooEmuAddress() (emulation.h), as a kernel does at ctx->address().
#include "../internal.h"
#include "emulated.h"

namespace torch_foo::driver {

using namespace emulated;

fooError_t device_native_handle(int device, void** /*native*/, void** /*context*/) {
  return runtime::fail(fooErrorNotSupported, "device %d is emulated: it has no vendor API objects", device);
}

fooError_t pointer_native_handle(const void* ptr, void** buffer, size_t* offset) {
  fooPointerAttributes a;
  pointer_attributes(ptr, &a);
  if (a.type != fooMemoryTypeDevice) {
    return runtime::fail(fooErrorInvalidDevicePointer, "%p is not inside a live device allocation", ptr);
  }
  *buffer = a.base;
  *offset = static_cast<size_t>(static_cast<const char*>(ptr) - static_cast<const char*>(a.base));
  return fooSuccess;
}

fooError_t launch_native(
    fooStream_t stream, const char* name, fooNativeFn_t fn, const void* arguments, size_t arguments_size) {
  Stream* s = stream_from_handle(stream);
  if (s == nullptr) {
    return runtime::fail(fooErrorInvalidResourceHandle, "unknown stream %p", static_cast<void*>(stream));
  }
  if (const auto err = capture_check(s); err != fooSuccess) {
    return err;
  }
  Task task;
  task.kind = Task::Kind::Native;
  task.native_fn = fn;
  const char* interned = intern(name);
  task.name = interned;
  store_params(task, arguments, arguments_size);
  enqueue(s, std::move(task), trace_tag(s, fooActivityKindKernel, interned));
  return fooSuccess;
}

} // namespace torch_foo::driver

extern "C" void* fooEmuAddress(const void* devicePtr) {
  return torch_foo::emulated::runtime_address(devicePtr);
}

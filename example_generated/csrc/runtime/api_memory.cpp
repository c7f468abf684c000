// Entry points: device memory, pinned host memory and copies. The rules a port keeps: argument
// checks, the fork state, allocations belong to the current device, zero-byte requests succeed
// without touching the device, and a NULL stream is the default stream of the current device.
#include "driver.h"
#include "internal.h"
#include "tracing_records.h"

using namespace torch_foo;
using namespace torch_foo::runtime;

namespace {

bool valid_kind(fooMemcpyKind kind) {
  return kind >= fooMemcpyHostToHost && kind <= fooMemcpyDeviceToDevice;
}

fooError_t bad_kind(fooMemcpyKind kind) {
  return fail(fooErrorInvalidValue, "%d is not a fooMemcpyKind", static_cast<int>(kind));
}

} // namespace

extern "C" {

fooError_t fooMalloc(void** devPtr, size_t size) {
  if (devPtr == nullptr) {
    return result(null_argument("devPtr"));
  }
  if (forked()) {
    return result(forked_child());
  }
  const int device = current_device();
  if (!valid_device(device)) {
    return result(bad_device(device));
  }
  use_device(device);
  *devPtr = nullptr;
  if (size == 0) {
    return result(fooSuccess);
  }
  return result(driver::malloc(device, size, devPtr));
}

fooError_t fooFree(void* devPtr) {
  if (devPtr == nullptr) {
    return result(fooSuccess);
  }
  if (forked()) {
    return result(forked_child());
  }
  if (const auto err = driver::capture_permits_unsafe_call("fooFree"); err != fooSuccess) {
    return result(err);
  }
  return result(driver::free(devPtr));
}

fooError_t fooMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) {
    return result(null_argument(free == nullptr ? "free" : "total"));
  }
  if (forked()) {
    return result(forked_child());
  }
  const int device = current_device();
  if (!valid_device(device)) {
    return result(bad_device(device));
  }
  return result(driver::mem_get_info(device, free, total));
}

fooError_t fooPointerGetAttributes(fooPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) {
    return result(null_argument("attributes"));
  }
  if (forked()) {
    return result(forked_child());
  }
  driver::pointer_attributes(ptr, attributes);
  return result(fooSuccess);
}

fooError_t fooPointerGetNativeHandle(const void* devicePtr, void** buffer, size_t* offset) {
  if (buffer == nullptr || offset == nullptr) {
    return result(null_argument(buffer == nullptr ? "buffer" : "offset"));
  }
  if (forked()) {
    return result(forked_child());
  }
  return result(driver::pointer_native_handle(devicePtr, buffer, offset));
}

fooError_t fooMallocHost(void** ptr, size_t size) {
  if (ptr == nullptr) {
    return result(null_argument("ptr"));
  }
  if (forked()) {
    return result(forked_child());
  }
  ensure_initialized();
  *ptr = nullptr;
  if (size == 0) {
    return result(fooSuccess);
  }
  return result(driver::malloc_host(size, ptr));
}

fooError_t fooFreeHost(void* ptr) {
  if (ptr == nullptr) {
    return result(fooSuccess);
  }
  if (forked()) {
    return result(forked_child());
  }
  if (const auto err = driver::capture_permits_unsafe_call("fooFreeHost"); err != fooSuccess) {
    return result(err);
  }
  return result(driver::free_host(ptr));
}

fooError_t fooMemcpy(void* dst, const void* src, size_t count, fooMemcpyKind kind) {
  if (forked()) {
    return result(forked_child());
  }
  if (!valid_kind(kind)) {
    return result(bad_kind(kind));
  }
  if (count == 0) {
    return result(fooSuccess);
  }
  if (dst == nullptr || src == nullptr) {
    return result(null_argument(dst == nullptr ? "dst" : "src"));
  }
  if (const auto err = driver::capture_permits_unsafe_call("fooMemcpy"); err != fooSuccess) {
    return result(err);
  }
  const tracing::ApiScope trace("fooMemcpy");
  return result(driver::memcpy(dst, src, count, kind));
}

fooError_t fooMemcpyAsync(void* dst, const void* src, size_t count, fooMemcpyKind kind, fooStream_t s) {
  if (forked()) {
    return result(forked_child());
  }
  if (!valid_kind(kind)) {
    return result(bad_kind(kind));
  }
  if (const auto err = resolve_stream(&s); err != fooSuccess) {
    return result(err);
  }
  if (count == 0) {
    return result(fooSuccess);
  }
  if (dst == nullptr || src == nullptr) {
    return result(null_argument(dst == nullptr ? "dst" : "src"));
  }
  const tracing::ApiScope trace("fooMemcpyAsync");
  return result(driver::memcpy_async(dst, src, count, kind, s));
}

fooError_t fooMemsetAsync(void* devPtr, int value, size_t count, fooStream_t stream) {
  if (forked()) {
    return result(forked_child());
  }
  if (const auto err = resolve_stream(&stream); err != fooSuccess) {
    return result(err);
  }
  if (count == 0) {
    return result(fooSuccess);
  }
  if (devPtr == nullptr) {
    return result(null_argument("devPtr"));
  }
  const tracing::ApiScope trace("fooMemsetAsync");
  return result(driver::memset_async(devPtr, value, count, stream));
}

} // extern "C"

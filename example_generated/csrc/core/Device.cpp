#include "Device.h"

#include "Exception.h"

namespace torch_foo {

c10::DeviceIndex device_count() noexcept {
  int count = 0;
  if (fooGetDeviceCount(&count) != fooSuccess) {
    return 0;
  }
  return static_cast<c10::DeviceIndex>(count);
}

void check_device_index(int64_t index) {
  const auto count = device_count();
  TORCH_CHECK(count > 0, "No foo devices are available: torch.foo.no_device_reason() says why");
  TORCH_CHECK(
      index >= 0 && index < count,
      "Invalid foo device index ",
      index,
      ": this process has ",
      static_cast<int>(count),
      " foo device(s), so valid indices are 0 to ",
      static_cast<int>(count) - 1,
      " (FOO_DEVICE_COUNT sets how many, up to what the driver has).");
}

c10::DeviceIndex current_device() {
  int device = 0;
  FOO_CHECK(fooGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  FOO_CHECK(fooSetDevice(index));
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  const auto previous = current_device();
  if (index != previous) {
    set_device(index);
  }
  return previous;
}

} // namespace torch_foo

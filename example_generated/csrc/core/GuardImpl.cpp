// Device guard: how PyTorch switches the current device and stream.
//
// c10::DeviceGuard, c10::StreamGuard, torch.foo.device(...), the autograd engine and the
// dispatcher's device_guard call this implementation whenever an operator runs on a foo
// tensor, to make the tensor's device current. On hardware, setDevice selects the driver context.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "Device.h"
#include "Exception.h"

namespace torch_foo {
namespace {

struct FooGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override {
    return static_type;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_INTERNAL_ASSERT(device.type() == static_type);
    return c10::Device(static_type, torch_foo::exchange_device(device.index()));
  }

  c10::Device getDevice() const override {
    return c10::Device(static_type, current_device());
  }

  void setDevice(c10::Device device) const override {
    TORCH_INTERNAL_ASSERT(device.type() == static_type);
    set_device(device.index());
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    // Restores a device that was valid before; nothing to report if it fails.
    (void)fooSetDevice(device.index());
  }

  // Only the default stream of each device exists so far.
  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    TORCH_CHECK(stream.id() == 0, "foo supports only the default stream");
    return c10::Stream(c10::Stream::DEFAULT, stream.device());
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  bool queryStream(const c10::Stream& /*stream*/) const override {
    return true; // the default stream finishes work before the launch returns
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    const c10::DeviceIndex previous = torch_foo::exchange_device(stream.device_index());
    FOO_CHECK(fooStreamSynchronize(nullptr));
    torch_foo::exchange_device(previous);
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    const c10::DeviceIndex previous = torch_foo::exchange_device(device_index);
    FOO_CHECK(fooDeviceSynchronize());
    torch_foo::exchange_device(previous);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, FooGuardImpl);

} // namespace
} // namespace torch_foo

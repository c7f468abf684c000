// Hooks: the questions PyTorch asks a PrivateUse1 backend outside of operators.
//
// at::globalContext() and torch.accelerator call these to learn whether the backend is built and
// available, how many devices exist, which device is current, where a pointer lives, and to
// initialise the device lazily (before the first backward pass, for example), and where pinned
// host memory comes from (tensor.pin_memory(), is_pinned()). Registering them also makes
// foo the process's accelerator for torch.accelerator, autograd and the DataLoader.
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "Device.h"
#include "DeviceAllocator.h"
#include "Exception.h"
#include "Generator.h"
#include "HostAllocator.h"

namespace torch_foo {
namespace {

struct FooHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return device_count() > 0;
  }

  // A device has its "primary context" once it was used: memory allocated or work launched.
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    int initialized = 0;
    return fooDeviceIsInitialized(device_index, &initialized) == fooSuccess && initialized != 0;
  }

  // The emulated runtime initialises itself on first use; a driver would be initialised here.
  void init() const override {
    int bad_fork = 0;
    FOO_CHECK(fooIsInBadFork(&bad_fork));
    TORCH_CHECK(bad_fork == 0, FOO_FORKED_CHILD_MESSAGE);
    TORCH_CHECK(device_count() > 0, "No foo devices are available: torch.foo.no_device_reason() says why");
  }

  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_device(device);
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return torch_foo::exchange_device(device);
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return torch_foo::exchange_device(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    fooPointerAttributes attributes{};
    FOO_CHECK(fooPointerGetAttributes(&attributes, data));
    TORCH_CHECK(attributes.device >= 0, "The pointer ", data, " is not foo device memory");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attributes.device));
  }

  at::Allocator* getPinnedMemoryAllocator() const override {
    return host_allocator();
  }

  // Answers without initialising anything (tensor.is_pinned() on any CPU tensor asks).
  bool isPinnedPtr(const void* data) const override {
    return is_pinned(data);
  }

  // Random operators without an explicit generator draw from the device's default generator;
  // torch.Generator(device="foo") asks for a new one (Generator.cpp).
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), new_bytes);
  }
};

// Registered when the extension is loaded, before any Python code runs.
const bool hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new FooHooks());
  return true;
}();

} // namespace
} // namespace torch_foo

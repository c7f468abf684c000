// Devices: counting them and selecting the current one, with PyTorch's error messages.
//
// Everything that takes a device index from a user goes through check_device_index(), so an index
// out of range is a Python exception that says which indices exist, never a crash.
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

#include "../runtime/runtime.h"

namespace torch_foo {

// The most devices a process can have (the driver's limit): the size of per-device tables.
constexpr size_t kMaxDevices = FOO_MAX_DEVICES;

// Number of devices; 0 if the runtime has none. Never initialises a device.
c10::DeviceIndex device_count() noexcept;

// Raises if `index` is not a valid device index for this process. Takes a wide integer so that
// indices from Python are checked before they are narrowed to c10::DeviceIndex.
void check_device_index(int64_t index);

c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
// Sets the current device and returns the previous one.
c10::DeviceIndex exchange_device(c10::DeviceIndex index);

} // namespace torch_foo

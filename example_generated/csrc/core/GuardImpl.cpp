// Device guard: how PyTorch switches the current device and stream, and drives events.
//
// c10::DeviceGuard, c10::StreamGuard, torch.foo.device(...), the autograd engine and the
// dispatcher's device_guard call this implementation whenever an operator runs on a foo
// tensor, to make the tensor's device current. torch.Stream, torch.Event, torch.accelerator's
// stream functions, the autograd engine (which orders a backward op after its forward stream) and
// tensor.record_stream reach the runtime's streams and events through it. On hardware, setDevice
// selects the driver context and the stream and event calls map one to one onto the driver's.
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "Device.h"
#include "DeviceAllocator.h"
#include "Exception.h"
#include "Stream.h"

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
    // Restores a device that was valid before; nothing to report if it fails. Every guard ends
    // here, nearly always on the device that is already current: reading it is the cheaper call.
    int current = -1;
    if (fooGetDevice(&current) != fooSuccess || current != device.index()) {
      (void)fooSetDevice(device.index());
    }
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  c10::DeviceCapability getDeviceCapability(c10::Device /*device*/) const override {
    // Every dtype works (natively or through the CPU fallback) except the quantized ones, which
    // need a QuantizedPrivateUse1 backend.
    c10::DeviceCapability capability;
    for (const auto index :
         {c10::kIndex_QInt8, c10::kIndex_QUInt8, c10::kIndex_QInt32, c10::kIndex_QUInt4x2, c10::kIndex_QUInt2x4}) {
      capability.capability_data.capability_bits &= ~(uint64_t{1} << index);
    }
    return capability;
  }

  // ---- streams ----

  c10::Stream getStream(c10::Device device) const override {
    return current_stream(index_of(device));
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return default_stream(index_of(device));
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool isHighPriority) const override {
    return stream_from_pool(index_of(device), isHighPriority ? -1 : 0);
  }

  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return stream_from_pool(index_of(device), priority);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return exchange_stream(stream);
  }

  void* getStreamNativeHandle(const c10::Stream stream) const override {
    return native_stream(stream);
  }

  bool queryStream(const c10::Stream& stream) const override {
    const c10::DeviceGuard guard(stream.device());
    const fooError_t error = fooStreamQuery(native_stream(stream));
    if (error == fooErrorNotReady) {
      return false;
    }
    FOO_CHECK(error);
    raise_deferred_error();
    return true;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    const c10::DeviceGuard guard(stream.device());
    note_synchronization();
    FOO_CHECK(fooStreamSynchronize(native_stream(stream)));
    raise_deferred_error();
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    const c10::DeviceGuard guard(c10::Device(static_type, device_index));
    note_synchronization();
    FOO_CHECK(fooDeviceSynchronize());
    raise_deferred_error();
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    device_allocator()->recordStream(data_ptr, stream);
  }

  // ---- events: `event` is a fooEvent_t, created on first record ----

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index, const c10::EventFlag flag)
      const override {
    TORCH_CHECK(
        device_index == -1 || device_index == stream.device_index(),
        "Event device index ",
        static_cast<int>(device_index),
        " does not match recording stream's device index ",
        static_cast<int>(stream.device_index()),
        ".");
    const c10::DeviceGuard guard(stream.device());
    const fooStream_t handle = native_stream(stream);
    if (*event == nullptr) {
      // torch.Event(enable_timing=True) asks for BACKEND_DEFAULT; PyTorch's default skips timing.
      const unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT ? fooEventDefault : fooEventDisableTiming;
      fooEvent_t created = nullptr;
      FOO_CHECK(fooEventCreateWithFlags(&created, flags));
      *event = created;
    }
    FOO_CHECK(fooEventRecord(static_cast<fooEvent_t>(*event), handle));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) {
      return;
    }
    const c10::DeviceGuard guard(stream.device());
    FOO_CHECK(fooStreamWaitEvent(native_stream(stream), static_cast<fooEvent_t>(event), 0));
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) {
      return true;
    }
    const fooError_t error = fooEventQuery(static_cast<fooEvent_t>(event));
    if (error == fooErrorNotReady) {
      return false;
    }
    FOO_CHECK(error);
    raise_deferred_error();
    return true;
  }

  void synchronizeEvent(void* event) const override {
    if (event != nullptr) {
      FOO_CHECK(fooEventSynchronize(static_cast<fooEvent_t>(event)));
      raise_deferred_error();
    }
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr, "Both events must be recorded before calculating elapsed time.");
    float ms = 0;
    FOO_CHECK(fooEventElapsedTime(&ms, static_cast<fooEvent_t>(start), static_cast<fooEvent_t>(end)));
    return ms;
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    if (event != nullptr) {
      (void)fooEventDestroy(static_cast<fooEvent_t>(event));
    }
  }

 private:
  static c10::DeviceIndex index_of(c10::Device device) {
    return device.has_index() ? device.index() : current_device();
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, FooGuardImpl);

} // namespace
} // namespace torch_foo

#include "Generator.h"

#include <array>
#include <cstring>
#include <mutex>

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>

#include "../runtime/runtime.h"
#include "Device.h"
#include "Graph.h"

namespace torch_foo {
namespace {

constexpr size_t kStateSize = 2 * sizeof(uint64_t); // seed, offset

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  if (device < 0) {
    return current_device();
  }
  check_device_index(device);
  return device;
}

} // namespace

FooGeneratorImpl::FooGeneratorImpl(c10::DeviceIndex device_index, uint64_t seed)
    : c10::GeneratorImpl(
          c10::Device(c10::DeviceType::PrivateUse1, device_index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void FooGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t FooGeneratorImpl::current_seed() const {
  return seed_;
}

uint64_t FooGeneratorImpl::seed() {
  const uint64_t random = c10::detail::getNonDeterministicRandom(/*is_cuda=*/true);
  set_current_seed(random);
  return random;
}

void FooGeneratorImpl::set_offset(uint64_t offset) {
  offset_ = offset;
}

uint64_t FooGeneratorImpl::get_offset() const {
  return offset_;
}

void FooGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  TORCH_CHECK(
      new_state.numel() == static_cast<int64_t>(kStateSize),
      "RNG state of a foo generator must have ",
      kStateSize,
      " bytes (seed and offset), got ",
      new_state.numel(),
      "; use a state returned by get_state() of a foo generator");
  std::array<uint64_t, 2> words{};
  std::memcpy(words.data(), new_state.data(), kStateSize);
  seed_ = words[0];
  offset_ = words[1];
}

c10::intrusive_ptr<c10::TensorImpl> FooGeneratorImpl::get_state() const {
  at::Tensor state = at::detail::empty_cpu({static_cast<int64_t>(kStateSize)}, c10::ScalarType::Byte);
  const std::array<uint64_t, 2> words{seed_, offset_};
  std::memcpy(state.data_ptr(), words.data(), kStateSize);
  return state.getIntrusivePtr();
}

PhiloxArgs FooGeneratorImpl::reserve(uint64_t increment) {
  graphs::check_not_capturing(
      device().index(),
      "a random operator",
      "its kernel takes the generator's seed and offset by value, so every replay would repeat the same numbers. "
      "Run it outside the graph and pass its result in as a static input");
  const PhiloxArgs args{seed_, offset_};
  offset_ += increment;
  return args;
}

c10::intrusive_ptr<FooGeneratorImpl> FooGeneratorImpl::clone() const {
  return c10::intrusive_ptr<FooGeneratorImpl>::reclaim(clone_impl());
}

FooGeneratorImpl* FooGeneratorImpl::clone_impl() const {
  auto* copy = new FooGeneratorImpl(device().index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<at::Generator, kMaxDevices> generators;
  const c10::DeviceIndex index = resolve(device);
  std::call_once(once[index], [index] { generators[index] = at::make_generator<FooGeneratorImpl>(index); });
  return generators[index];
}

at::Generator new_generator(c10::DeviceIndex device) {
  return at::make_generator<FooGeneratorImpl>(resolve(device));
}

FooGeneratorImpl* generator_for(const std::optional<at::Generator>& gen, c10::Device device) {
  return at::get_generator_or_default<FooGeneratorImpl>(gen, default_generator(device.index()));
}

} // namespace torch_foo

// Random number generators: one default generator per foo device, and new ones on request.
//
// PyTorch asks the hooks (Hooks.cpp) for a device's default generator (the one random operators use
// when no generator is passed, and torch.foo.manual_seed seeds) and for new generators
// (torch.Generator(device="foo")). Like CUDA's, the generator is a counter-based Philox
// stream: its whole state is a 64-bit seed and a 64-bit offset, so a kernel needs no generator
// object on the device. The host reserves a range of offsets under the generator's lock and passes
// seed and offset to the kernel by value; the kernel's elements draw from Philox subsequences
// chosen by their index, at that offset. A real device keeps this file and uses the same
// seed/offset arguments in its kernels (curand's Philox4_32_10 and at::philox_engine compute the
// same stream, as CUDA's generator does).
#pragma once

#include <cstdint>

#include <ATen/core/Generator.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <c10/core/GeneratorImpl.h>

namespace torch_foo {

// What a random kernel receives: the stream (seed) and the first unused offset of that stream.
struct PhiloxArgs {
  uint64_t seed;
  uint64_t offset;

  // The engine of Philox subsequence `subsequence` at this offset: 4 x 32 random bits per offset.
  at::philox_engine engine(uint64_t subsequence) const {
    return at::philox_engine(seed, subsequence, offset);
  }
};

class FooGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit FooGeneratorImpl(c10::DeviceIndex device_index, uint64_t seed = c10::default_rng_seed_val);
  ~FooGeneratorImpl() override = default;

  static c10::DeviceType device_type() {
    return c10::DeviceType::PrivateUse1;
  }

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  // The state is a CPU uint8 tensor of 16 bytes: the seed, then the offset (native byte order).
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // Reserves `increment` offsets (128 random bits each, per subsequence) for one kernel launch and
  // returns where they start. The caller holds mutex_.
  PhiloxArgs reserve(uint64_t increment);

  c10::intrusive_ptr<FooGeneratorImpl> clone() const;

 private:
  FooGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The default generator of `device` (-1: the current device), created on first use.
const at::Generator& default_generator(c10::DeviceIndex device = -1);

// A new generator on `device` (-1: the current device), seeded with the default seed.
at::Generator new_generator(c10::DeviceIndex device = -1);

// The foo generator a random operator uses: `gen` if given (checked to be one of ours), else
// the default generator of `device`. Raises a clear error for a generator of another device type.
FooGeneratorImpl* generator_for(const std::optional<at::Generator>& gen, c10::Device device);

} // namespace torch_foo

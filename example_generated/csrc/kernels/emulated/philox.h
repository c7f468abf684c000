// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), the counter-based
// generator of PyTorch's CPU and CUDA generators and of every random kernel of the emulated device.
// A draw depends only on (seed, subsequence, offset), so any block of any kernel computes its own.
#pragma once

#include <cstdint>
#include <cstring>

namespace torch_foo::kernels {

// The four 32-bit words of the block at `offset` in subsequence `subsequence` of the stream `seed`.
struct PhiloxBlock {
  uint32_t w[4];

  PhiloxBlock(uint64_t seed, uint64_t subsequence, uint64_t offset) {
    uint32_t counter[4] = {
        static_cast<uint32_t>(offset),
        static_cast<uint32_t>(offset >> 32),
        static_cast<uint32_t>(subsequence),
        static_cast<uint32_t>(subsequence >> 32)};
    uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    for (int round = 0; round < 10; ++round) {
      const uint64_t product0 = uint64_t{0xD2511F53} * counter[0];
      const uint64_t product1 = uint64_t{0xCD9E8D57} * counter[2];
      const uint32_t next[4] = {
          static_cast<uint32_t>(product1 >> 32) ^ counter[1] ^ key[0],
          static_cast<uint32_t>(product1),
          static_cast<uint32_t>(product0 >> 32) ^ counter[3] ^ key[1],
          static_cast<uint32_t>(product0)};
      std::memcpy(counter, next, sizeof(counter));
      key[0] += 0x9E3779B9;
      key[1] += 0xBB67AE85;
    }
    std::memcpy(w, counter, sizeof(w));
  }

  uint64_t u64(int i) const {
    return (static_cast<uint64_t>(w[i]) << 32) | w[i + 1];
  }
};

// A uniform float in [0, 1) from one word (24 random bits: float precision).
inline float uniform_float(uint32_t word) {
  return static_cast<float>(word >> 8) * 0x1.0p-24f;
}

} // namespace torch_foo::kernels

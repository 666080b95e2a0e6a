// Dropout's mask as a pure function of (seed, element): a counter-based hash
// (splitmix64's finaliser), so the CPU and the GPU draw the same mask and
// backward recomputes it instead of storing it. Shared by cpu/ and cuda/.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MDDP_HOST_DEVICE __host__ __device__
#else
#define MDDP_HOST_DEVICE
#endif

namespace mddp::tensor {

// Uniform in [0, 1) with 24 bits, for element i of the mask drawn from `seed`.
MDDP_HOST_DEVICE inline float dropout_uniform(uint64_t seed, int64_t i) {
  uint64_t z = seed + static_cast<uint64_t>(i + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f;
}

// The kept elements are scaled by 1 / (1 - p), so the expectation is unchanged.
MDDP_HOST_DEVICE inline float dropout_factor(uint64_t seed, int64_t i, float p) {
  return dropout_uniform(seed, i) < p ? 0.0f : 1.0f / (1.0f - p);
}

}  // namespace mddp::tensor

// A small, fully specified random generator (xoshiro256** seeded by
// splitmix64), so that a seed gives the same numbers on every platform and
// standard library: initial weights and synthetic data are reproducible bit
// for bit, which the equivalence tests rely on.
#pragma once

#include <cmath>
#include <cstdint>

namespace mddp {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) s = splitmix64(seed);
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 24 bits of precision (exactly representable in float).
  float uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

  // Standard normal by Box-Muller (one value per call; simple, not fast).
  float normal() {
    const double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }

  // Uniform integer in [0, n) (n > 0); the tiny modulo bias is irrelevant here.
  uint64_t below(uint64_t n) { return next_u64() % n; }

 private:
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t s_[4];
};

}  // namespace mddp

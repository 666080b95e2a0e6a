// Seed derivation: every random stream in data/ (teacher weights, samples,
// each epoch's shuffle) gets its own mddp::Rng seed derived from the user's
// seed and a purpose, so streams never overlap and each is reproducible alone.
#pragma once

#include <cstdint>

namespace mddp::data {

// splitmix64's finaliser over the pair: nearby seeds and purposes land far apart.
inline uint64_t derive_seed(uint64_t seed, uint64_t purpose) {
  uint64_t z = seed ^ (purpose * 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace mddp::data

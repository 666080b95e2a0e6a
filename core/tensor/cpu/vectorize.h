// What makes a CPU kernel's loop vectorise (cpu/kernels.cc, cpu/transformer.cc):
// the AVX2 clones of Note [Kernel clones], -fno-math-errno (a sqrt that may
// set errno is a branch to libm per element: Adam ran scalar and 2.3x slower),
// and a tanh the compiler can vectorise (the C library's is a scalar call:
// GPT-2's GELU spent 40% of a training step of the default GPT in tanhf).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "core/common/sanitizers.h"

// Note [Kernel clones]: the portable build targets baseline x86-64 (SSE2),
// so each element-wise loop is also compiled for AVX2 and the CPU picks the
// clone at load time (GCC target_clones, an ifunc). The clones compute the
// same values: the loops are element-wise (no reassociation) and AVX2 alone
// does not contract a*b+c into FMA. Off under the sanitizers: their runtimes
// are not ready when ifunc resolvers run at load time (TSan crashes).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MDDP_TSAN) && \
    !defined(MDDP_ASAN)
#define MDDP_VECTOR_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define MDDP_VECTOR_KERNEL
#endif

namespace mddp::tensor::cpu {

// e^x for x in [-87, 0], within a few ulp and branch-free: x = n ln2 + r
// with |r| <= ln2 / 2 (ln2 split in two so n ln2 is exact; adding and
// taking away 1.5 * 2^23 rounds to an integer), e^r by its Taylor series
// to r^7 (truncation < 6e-9 relative), times 2^n built in the exponent bits.
inline float exp_nonpositive(float x) {
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;
  const float p =
      1.0f +
      r * (1.0f +
           r * (0.5f +
                r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r / 5040))))));
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

// tanh(u) = sign(u) (1 - e) / (1 + e), e = e^{-2|u|}: within 1e-7 of the
// true value. |u| is capped at 10 (tanh(10) is 1 in float) through its
// bits, which order like the values for non-negative floats: an integer min
// vectorises where a float one, under IEEE trapping rules, does not.
inline float vtanh(float u) {
  const int32_t capped =
      std::min(std::bit_cast<int32_t>(std::fabs(u)), std::bit_cast<int32_t>(10.0f));
  const float e = exp_nonpositive(-2.0f * std::bit_cast<float>(capped));
  return std::copysign((1.0f - e) / (1.0f + e), u);
}

}  // namespace mddp::tensor::cpu

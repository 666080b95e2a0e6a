// 16-bit floating point <-> fp32, written out by hand so the rounding is
// visible: every narrowing rounds to nearest, ties to even (IEEE 754's
// default), NaN stays NaN, overflow becomes infinity.
//
//   fp16 (IEEE binary16): 1 sign, 5 exponent (bias 15), 10 mantissa bits.
//        Largest 65504, smallest normal 2^-14, subnormals down to 2^-24.
//        Integers are exact up to 2048; relative rounding error <= 2^-11.
//   bf16 (bfloat16): the top 16 bits of an fp32: 1 sign, 8 exponent (bias
//        127), 7 mantissa bits. fp32's range, integers exact up to 256;
//        relative rounding error <= 2^-8.
//
// Collectives carry these on the wire and accumulate in fp32
// (reduce_kernels.h), so each conversion below is one rounding. The DDP
// compression hook rounds gradients with them on the CPU (tensor ops
// round_to_half/widen_from_half); on a GPU the same ops use CUDA's own
// round-to-nearest-even intrinsics, which agree except for NaN payloads.
#pragma once

#include <bit>
#include <cstdint>

namespace mddp {

// Which 16-bit format a buffer of uint16_t holds.
enum class HalfFormat { kFp16, kBf16 };

inline float bf16_to_float(uint16_t h) {
  return std::bit_cast<float>(uint32_t{h} << 16);
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  // Add just under half an ulp of the 16-bit result, plus one if the kept
  // part is odd: a tie then carries only from an odd value (ties to even).
  // A carry out of the mantissa bumps the exponent, which is also correct
  // (and turns the largest finite values into infinity).
  const uint32_t bias = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + bias) >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);  // +-0
    // Subnormal: mant * 2^-24. Shift the leading 1 into the implicit bit.
    int e = -14;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    mant &= 0x3ffu;
    return std::bit_cast<float>(sign | (static_cast<uint32_t>(e + 127) << 23) | (mant << 13));
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));  // 112 = 127 - 15
}

inline uint16_t float_to_fp16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // inf stays inf; NaN keeps its top payload bits, made quiet
    return static_cast<uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u | (x >> 13) : 0u));
  }
  // 0x477ff000 = 65520, halfway between 65504 (odd mantissa) and 2^16: ties
  // to even, so it and everything above round to infinity.
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (x >= 0x38800000u) {  // a normal fp16 (>= 2^-14): rebias, round away 13 bits
    const uint32_t h = (x - 0x38000000u) >> 13;  // 0x38000000 = 112 << 23
    const uint32_t rem = x & 0x1fffu;
    const uint32_t up = (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ? 1u : 0u;
    return static_cast<uint16_t>(sign | (h + up));  // a carry may correctly bump the exponent
  }
  // Subnormal fp16: the result counts units of 2^-24. A float with biased
  // exponent e and 24-bit significand m is m * 2^(e-150) = m >> (126 - e) units.
  const uint32_t e = x >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero
  const uint32_t m = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // may become 0x400, the smallest normal
  return static_cast<uint16_t>(sign | h);
}

}  // namespace mddp

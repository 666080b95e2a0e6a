// half.h and reduce_kernels against independent references: the CPU's own
// conversion instructions (F16C) for fp16, a brute-force
// nearest-value search in double for bf16, and plain double arithmetic for
// the reductions. Single process; lives here beside the collectives it serves.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/comm/reduce_kernels.h"
#include "core/common/half.h"
#include "core/common/half_convert.h"

namespace mddp::comm {
namespace {

// Float bit patterns worth checking: a stride through all 2^32 (hits every
// exponent, both signs) plus every rounding edge near fp16's and bf16's
// boundaries (halfway points, subnormal edges, overflow).
std::vector<uint32_t> sample_patterns() {
  std::vector<uint32_t> v;
  for (uint64_t x = 0; x <= 0xffffffffu; x += 65521) v.push_back(static_cast<uint32_t>(x));
  for (uint32_t base : {0x33000000u, 0x33800000u, 0x387fe000u, 0x38800000u, 0x3f800000u,
                        0x477fe000u, 0x477ff000u, 0x47800000u, 0x7f7fffffu, 0x00000001u})
    for (int d = -4100; d <= 4100; ++d) {
      v.push_back(base + static_cast<uint32_t>(d));
      v.push_back((base + static_cast<uint32_t>(d)) | 0x80000000u);
    }
  return v;
}

// F16C, compiled for it whatever the build targets (every x86-64 CPU since
// 2012 has it; fp16_uses_f16c says whether this one does).
__attribute__((target("f16c"))) float hardware_fp16_to_float(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
__attribute__((target("f16c"))) uint16_t hardware_float_to_fp16(float f) {
  return static_cast<uint16_t>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
#define SKIP_WITHOUT_F16C() \
  if (!fp16_uses_f16c()) GTEST_SKIP() << "this CPU has no F16C, the reference"

TEST(HalfTest, Fp16ToFloatMatchesHardwareForAll65536) {
  SKIP_WITHOUT_F16C();
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float want = hardware_fp16_to_float(static_cast<uint16_t>(h));
    const float got = fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << std::hex << h;
    }
  }
}

TEST(HalfTest, FloatToFp16MatchesHardwareRounding) {
  SKIP_WITHOUT_F16C();
  for (uint32_t bits : sample_patterns()) {
    const float f = std::bit_cast<float>(bits);
    const uint16_t want = hardware_float_to_fp16(f);
    const uint16_t got = float_to_fp16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(fp16_to_float(got))) << std::hex << bits;
    } else {
      ASSERT_EQ(got, want) << "float bits 0x" << std::hex << bits << " = " << f;
    }
  }
}

// The buffer conversions (F16C where the CPU has it) against the scalar
// ones above: every fp16, and the float sample, at an odd offset and length
// so both the 8-wide body and the scalar tail run. NaN stays NaN (its payload
// is unspecified, as for the scalar conversion).
TEST(HalfTest, BufferConversionsAgreeWithTheScalarOnes) {
  std::printf("fp16 buffers convert with %s\n", fp16_uses_f16c() ? "F16C" : "the scalar loop");
  std::vector<uint16_t> halves(1 + 65536 + 5);
  for (std::size_t i = 0; i < halves.size(); ++i)
    halves[i] = static_cast<uint16_t>(i * 40503u);  // odd: a permutation
  std::vector<float> widened(halves.size());
  fp16_to_float_n(halves.data() + 1, halves.size() - 1, widened.data() + 1);
  for (std::size_t i = 1; i < halves.size(); ++i) {
    const float want = fp16_to_float(halves[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(widened[i])) << std::hex << halves[i];
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(widened[i]), std::bit_cast<uint32_t>(want))
          << std::hex << halves[i];
    }
  }
  std::vector<float> floats;
  for (uint32_t bits : sample_patterns()) floats.push_back(std::bit_cast<float>(bits));
  floats.resize(floats.size() | 1);  // odd, so the tail runs
  std::vector<uint16_t> narrowed(floats.size());
  float_to_fp16_n(floats.data() + 1, floats.size() - 1, narrowed.data() + 1);
  for (std::size_t i = 1; i < floats.size(); ++i) {
    if (std::isnan(floats[i])) {
      ASSERT_TRUE(std::isnan(fp16_to_float(narrowed[i])))
          << std::hex << std::bit_cast<uint32_t>(floats[i]);
    } else {
      ASSERT_EQ(narrowed[i], float_to_fp16(floats[i]))
          << std::hex << std::bit_cast<uint32_t>(floats[i]);
    }
  }
}

// The bf16 nearest to f, found by comparing the two candidates in double.
uint16_t bf16_reference(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto lo = static_cast<uint16_t>(bits >> 16);  // toward zero
  const auto hi = static_cast<uint16_t>(lo + 1);      // away from zero (may be inf)
  // Distances compared in magnitude, so both signs work alike.
  const double dl = std::fabs(std::fabs(static_cast<double>(f)) - std::fabs(bf16_to_float(lo)));
  // Past the largest finite value IEEE rounds as if the next step up, 2^128,
  // existed; landing there means infinity.
  const double hi_value =
      std::isinf(bf16_to_float(hi)) ? std::ldexp(1.0, 128) : std::fabs(bf16_to_float(hi));
  const double dh = std::fabs(std::fabs(static_cast<double>(f)) - hi_value);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;  // tie: even
}

TEST(HalfTest, FloatToBf16RoundsToNearestEven) {
  for (uint32_t bits : sample_patterns()) {
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << std::hex << bits;
      continue;
    }
    if (std::isinf(f)) continue;  // the reference's lo+1 would be NaN
    ASSERT_EQ(float_to_bf16(f), bf16_reference(f)) << "float bits 0x" << std::hex << bits;
  }
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
}

TEST(HalfTest, RoundTripIsExactFor16BitValues) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto x = static_cast<uint16_t>(h);
    if (!std::isnan(fp16_to_float(x))) {
      ASSERT_EQ(float_to_fp16(fp16_to_float(x)), x) << h;
    }
    if (!std::isnan(bf16_to_float(x))) {
      ASSERT_EQ(float_to_bf16(bf16_to_float(x)), x) << h;
    }
  }
}

TEST(ReduceKernelsTest, Fp32OpsMatchScalarReference) {
  std::vector<float> a{1.5f, -2.0f, 3.25f, 0.0f, 7.0f}, b{0.5f, 4.0f, -3.25f, -1.0f, 7.0f};
  std::vector<float> out(a.size());
  reduce(out.data(), a.data(), b.data(), a.size(), DataType::kFloat32, ReduceOp::kSum);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  reduce(out.data(), a.data(), b.data(), a.size(), DataType::kFloat32, ReduceOp::kMax);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(out[i], std::max(a[i], b[i]));
  reduce(out.data(), a.data(), b.data(), a.size(), DataType::kFloat32, ReduceOp::kMin);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(out[i], std::min(a[i], b[i]));
  // kAvg combines as a sum; dividing is a separate step.
  reduce(a.data(), a.data(), b.data(), a.size(), DataType::kFloat32, ReduceOp::kAvg);
  divide(a.data(), a.size(), DataType::kFloat32, 2.0f);
  EXPECT_EQ(a[0], 1.0f);
  EXPECT_EQ(a[2], 0.0f);
}

// 16-bit: each result is the fp32 result rounded once, so 0.1 + 0.2 in bf16
// is round(bf16(0.1) + bf16(0.2)), not a sum of rounded halves.
TEST(ReduceKernelsTest, SixteenBitRoundsOnceFromFp32) {
  for (auto t : {DataType::kFloat16, DataType::kBFloat16}) {
    auto enc = [&](float f) {
      return t == DataType::kFloat16 ? float_to_fp16(f) : float_to_bf16(f);
    };
    auto dec = [&](uint16_t h) {
      return t == DataType::kFloat16 ? fp16_to_float(h) : bf16_to_float(h);
    };
    std::vector<uint16_t> a, b;
    for (int i = 0; i < 200; ++i) {
      a.push_back(enc(0.37f * static_cast<float>(i) - 30.0f));
      b.push_back(enc(1.0f / static_cast<float>(i + 3)));
    }
    std::vector<uint16_t> out(a.size());
    reduce(out.data(), a.data(), b.data(), a.size(), t, ReduceOp::kSum);
    std::vector<float> acc(a.size());
    to_float(acc.data(), a.data(), a.size(), t);
    accumulate(acc.data(), b.data(), b.size(), t, ReduceOp::kSum);
    std::vector<uint16_t> narrowed(a.size());
    from_float(narrowed.data(), acc.data(), acc.size(), t, 4.0f);
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double exact = static_cast<double>(dec(a[i])) + dec(b[i]);  // exact in double
      EXPECT_EQ(out[i], enc(static_cast<float>(exact))) << to_string(t) << " i=" << i;
      EXPECT_EQ(acc[i], static_cast<float>(exact));
      EXPECT_EQ(narrowed[i], enc(static_cast<float>(exact) / 4.0f));
      EXPECT_LE(std::fabs(dec(out[i]) - exact), unit_roundoff(t) * std::fabs(exact) + 1e-7);
    }
  }
}

}  // namespace
}  // namespace mddp::comm

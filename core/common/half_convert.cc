#include "core/common/half_convert.h"

#include "core/common/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define MDDP_HAVE_F16C_PATH 1
#endif

namespace mddp {
namespace {

void widen_scalar(const uint16_t* src, std::size_t n, float* dst) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = fp16_to_float(src[i]);
}

void narrow_scalar(const float* src, std::size_t n, uint16_t* dst) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = float_to_fp16(src[i]);
}

#ifdef MDDP_HAVE_F16C_PATH
// Compiled for F16C (and the AVX it needs) whatever the build's baseline;
// only called when the CPU says it has both. The tail of fewer than 8 goes
// through the scalar loop.
__attribute__((target("avx,f16c"))) void widen_f16c(const uint16_t* src, std::size_t n,
                                                    float* dst) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  widen_scalar(src + i, n - i, dst + i);
}

__attribute__((target("avx,f16c"))) void narrow_f16c(const float* src, std::size_t n,
                                                     uint16_t* dst) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  narrow_scalar(src + i, n - i, dst + i);
}

// __builtin_cpu_supports knows "avx" (it also checks that the OS saves the
// AVX registers) but older clangs do not know "f16c", so that bit is read
// from CPUID leaf 1 directly.
bool cpu_has_f16c() {
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return __builtin_cpu_supports("avx") && (ecx & bit_F16C) != 0;
}
#else
bool cpu_has_f16c() {
  return false;
}
#endif

// Decided once, on first use (a function-local static: thread-safe).
bool use_f16c() {
  static const bool yes = cpu_has_f16c();
  return yes;
}

}  // namespace

void fp16_to_float_n(const uint16_t* src, std::size_t n, float* dst) {
#ifdef MDDP_HAVE_F16C_PATH
  if (use_f16c()) return widen_f16c(src, n, dst);
#endif
  widen_scalar(src, n, dst);
}

void float_to_fp16_n(const float* src, std::size_t n, uint16_t* dst) {
#ifdef MDDP_HAVE_F16C_PATH
  if (use_f16c()) return narrow_f16c(src, n, dst);
#endif
  narrow_scalar(src, n, dst);
}

bool fp16_uses_f16c() {
  return use_f16c();
}

}  // namespace mddp

// Whole buffers of fp16 <-> fp32. half.h converts one value at a time and
// branches on subnormals, infinities and NaN, which no compiler vectorises;
// x86's F16C instructions (on every AVX2 CPU) convert 8 values per
// instruction with the same rounding (nearest, ties to even) and the same
// special values. These use F16C where the CPU has it, checked once on first
// use, and the scalar half.h loop otherwise; the two agree bit for bit
// but for NaN payloads (kernels_test.cc: every fp16, 230k floats at the rounding edges).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mddp {

// dst[i] = fp16_to_float(src[i]) for i < n.
void fp16_to_float_n(const uint16_t* src, std::size_t n, float* dst);
// dst[i] = float_to_fp16(src[i]) for i < n.
void float_to_fp16_n(const float* src, std::size_t n, uint16_t* dst);
// Whether the two above run on F16C (false: the scalar loop).
bool fp16_uses_f16c();

}  // namespace mddp

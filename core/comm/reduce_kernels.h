// Element-wise reductions over the three wire types, always computed in fp32:
// a 16-bit value is widened, combined, and rounded once (half.h). The
// algorithms call these on one segment at a time.
//
// Accuracy: reducing n ranks' values that travel as 16-bit rounds at most
// once per hop, so |result - exact| <= n * u * sum_i |x_i| with u = 2^-8
// (bf16) or 2^-11 (fp16) (kUnitRoundoff); fp32 sums of integers below 2^24
// are exact. Max/min are exact; NaN propagation through them is unspecified.
#pragma once

#include <cstddef>

#include "core/comm/types.h"

namespace mddp::comm {

// Relative rounding error of one rounding to `t` (the u above).
double unit_roundoff(DataType t);

// The op applied between ranks' values: avg is a sum, divided at the end.
inline ReduceOp combine_op(ReduceOp op) {
  return op == ReduceOp::kAvg ? ReduceOp::kSum : op;
}

// dst[i] = op(a[i], b[i]) for i < n. dst may alias a or b. kAvg acts as kSum.
void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType t, ReduceOp op);
// acc[i] = op(acc[i], float(src[i])): fp32 accumulation of 16-bit inputs.
void accumulate(float* acc, const void* src, std::size_t n, DataType t, ReduceOp op);
// dst[i] = float(src[i]).
void to_float(float* dst, const void* src, std::size_t n, DataType t);
// dst[i] = round(src[i] / divisor) in type t (divisor 1: a plain narrowing).
void from_float(void* dst, const float* src, std::size_t n, DataType t, float divisor = 1.0f);
// data[i] = round(data[i] / divisor), in place: the last step of kAvg.
void divide(void* data, std::size_t n, DataType t, float divisor);

}  // namespace mddp::comm

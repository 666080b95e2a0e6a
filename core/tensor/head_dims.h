// The attention's two layouts (ops.h split_heads / merge_heads), for both
// backends: a row of x [B, T, P*H*D] holds P parts (q, k, v of one
// nn.Linear(C, 3C)) of H heads of D columns; heads [P, B, H, T, D] holds
// each (part, sequence, head) as a contiguous [T, D] matrix for gemm_batched.
#pragma once

#include <cstdint>

namespace mddp::tensor {

struct HeadDims {
  int64_t p, b, h, t, d;
  int64_t numel() const { return p * b * h * t * d; }
};

}  // namespace mddp::tensor

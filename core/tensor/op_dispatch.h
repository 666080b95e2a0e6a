// What every file of ops.h's implementation shares (ops.cc, ops_transformer.cc):
// the device check and the GEMM at the thread's precision. Internal to core/tensor.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/tensor/tensor.h"
#include "mddp/config.h"

namespace mddp::tensor::detail {

inline constexpr bool kHaveCuda = MDDP_HAVE_CUDA;

// The one device all of an op's (defined) tensors live on; throws naming the
// op for tensors on two devices, or a CUDA tensor in a build without CUDA.
Device op_device(const char* op, std::initializer_list<const Tensor*> ts);

// The CPU GEMM at the calling thread's precision (Note [Autocast] in precision.h).
void cpu_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              const float* b, float beta, float* c);

void require_same_numel(const char* op, const Tensor& a, const Tensor& b);

}  // namespace mddp::tensor::detail

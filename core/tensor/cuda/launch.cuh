// How the element-wise kernels are launched, and the block reduction the
// reducing kernels share (for .cu files).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/tensor/cuda/check.cuh"
#include "core/tensor/cuda/context.cuh"

namespace mddp::tensor::cuda {

inline constexpr int kThreads = 256;
// 2^16 blocks of 256 threads are far more than any GPU runs at once; larger
// arrays are covered by the grid-stride loop below.
inline constexpr int64_t kMaxBlocks = int64_t{1} << 16;

template <typename F>
__global__ void for_each_index_kernel(int64_t n, F f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    f(i);
}

// Runs f(i) for every i in [0, n) on ctx's stream. F is a small struct of
// device pointers and scalars (copied into the kernel's parameters) with a
// `__device__ void operator()(int64_t i) const`. Each i is one output element,
// written by exactly one thread: no atomics, the same result every run.
template <typename F>
void for_each_index(const Context& ctx, int64_t n, const F& f) {
  if (n <= 0) return;  // a grid of zero blocks is a launch error
  const int64_t blocks = std::min((n + kThreads - 1) / kThreads, kMaxBlocks);
  for_each_index_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, ctx.stream>>>(n, f);
  MDDP_CUDA_CHECK_LAUNCH("for_each_index_kernel");
}

struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Min {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

// Combines every thread's v with op, in a fixed order (deterministic); the
// result is valid in thread 0 only. Every thread of the block must call it,
// and blockDim.x must be a multiple of 32. May be called repeatedly.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T partial[32];  // one per warp
  for (int offset = 16; offset > 0; offset /= 2)
    v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  __syncthreads();  // a previous call may still be reading partial
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0)
    for (unsigned w = 1; w < blockDim.x / 32; ++w) v = op(v, partial[w]);
  return v;
}

}  // namespace mddp::tensor::cuda

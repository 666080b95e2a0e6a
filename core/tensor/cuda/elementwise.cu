// Element-wise ops: one functor per op, all launched by for_each_index.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/tensor/cuda/kernels.h"
#include "core/tensor/cuda/launch.cuh"

namespace mddp::tensor::cuda {
namespace {

struct Fill {
  float* x;
  float value;
  __device__ void operator()(int64_t i) const { x[i] = value; }
};

struct Scale {
  float* x;
  float alpha;
  __device__ void operator()(int64_t i) const { x[i] *= alpha; }
};

struct Axpy {
  float alpha;
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] += alpha * x[i]; }
};

// y viewed as [N, C, inner]: element i belongs to channel (i / inner) % C.
struct BiasAdd {
  float* y;
  const float* bias;
  int64_t c, inner;
  __device__ void operator()(int64_t i) const { y[i] += bias[(i / inner) % c]; }
};

struct ReluForward {
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
};

struct ReluBackward {
  const float *y, *dy;
  float* dx;
  __device__ void operator()(int64_t i) const { dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; }
};

// CUDA's _rn conversions round to nearest, ties to even, like bits.h.
struct RoundToFp16 {
  const float* x;
  uint16_t* bits;
  __device__ void operator()(int64_t i) const { bits[i] = __half_as_ushort(__float2half_rn(x[i])); }
};
struct RoundToBf16 {
  const float* x;
  uint16_t* bits;
  __device__ void operator()(int64_t i) const {
    bits[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
  }
};
struct WidenFp16 {
  const uint16_t* bits;
  float* x;
  __device__ void operator()(int64_t i) const { x[i] = __half2float(__ushort_as_half(bits[i])); }
};
struct WidenBf16 {
  const uint16_t* bits;
  float* x;
  __device__ void operator()(int64_t i) const {
    x[i] = __bfloat162float(__ushort_as_bfloat16(bits[i]));
  }
};

struct MseBackward {
  const float *pred, *target;
  float k;  // 2 / numel
  float* dpred;
  __device__ void operator()(int64_t i) const { dpred[i] = k * (pred[i] - target[i]); }
};

}  // namespace

void fill(int device, float* x, int64_t n, float value) {
  for_each_index(context(device), n, Fill{x, value});
}

void copy_on_device(int device, const float* src, float* dst, int64_t n) {
  if (n <= 0 || src == dst) return;
  const Context& ctx = context(device);
  MDDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, ctx.stream));
}

void scale(int device, float* x, int64_t n, float alpha) {
  for_each_index(context(device), n, Scale{x, alpha});
}

void axpy(int device, float alpha, const float* x, float* y, int64_t n) {
  for_each_index(context(device), n, Axpy{alpha, x, y});
}

void round_to_half(int device, const float* x, int64_t n, bool bf16, uint16_t* bits) {
  if (bf16)
    for_each_index(context(device), n, RoundToBf16{x, bits});
  else
    for_each_index(context(device), n, RoundToFp16{x, bits});
}

void widen_from_half(int device, const uint16_t* bits, int64_t n, bool bf16, float* x) {
  if (bf16)
    for_each_index(context(device), n, WidenBf16{bits, x});
  else
    for_each_index(context(device), n, WidenFp16{bits, x});
}

void bias_add(int device, float* y, const float* bias, int64_t n, int64_t c, int64_t inner) {
  for_each_index(context(device), n * c * inner, BiasAdd{y, bias, c, inner});
}

void relu_forward(int device, const float* x, float* y, int64_t n) {
  for_each_index(context(device), n, ReluForward{x, y});
}

void relu_backward(int device, const float* y, const float* dy, float* dx, int64_t n) {
  for_each_index(context(device), n, ReluBackward{y, dy, dx});
}

void mse_backward(int device, const float* pred, const float* target, int64_t n, float* dpred) {
  for_each_index(context(device), n,
                 MseBackward{pred, target, 2.0f / static_cast<float>(n), dpred});
}

}  // namespace mddp::tensor::cuda

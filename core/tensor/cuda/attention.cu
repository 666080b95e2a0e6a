// The attention's kernels: every head's product in one cuBLAS call
// (gemm_batched), the head layouts, and the causal softmax. One thread per
// output element or per softmax row, so each value is computed once, in a
// fixed order: the same result every run.
#include <climits>

#include "core/common/check.h"
#include "core/tensor/cuda/cublas.cuh"
#include "core/tensor/cuda/kernels.h"
#include "core/tensor/cuda/launch.cuh"

namespace mddp::tensor::cuda {
namespace {

// Element i of heads [P, B, H, T, D] and where it sits in x [B, T, P, H, D].
__device__ int64_t row_index_of_head(int64_t i, const HeadDims& d) {
  const int64_t dd = i % d.d, t = (i / d.d) % d.t, h = (i / (d.d * d.t)) % d.h;
  const int64_t b = (i / (d.d * d.t * d.h)) % d.b, p = i / (d.d * d.t * d.h * d.b);
  return (((b * d.t + t) * d.p + p) * d.h + h) * d.d + dd;
}

struct SplitHeads {
  const float* x;
  HeadDims d;
  float* heads;
  __device__ void operator()(int64_t i) const { heads[i] = x[row_index_of_head(i, d)]; }
};

struct MergeHeads {
  const float* heads;
  HeadDims d;
  float* x;
  __device__ void operator()(int64_t i) const { x[row_index_of_head(i, d)] = heads[i]; }
};

// Row r of the [T, T] matrices: softmax of its first (r % T) + 1 entries, zeros after.
struct CausalSoftmaxRow {
  const float* scores;
  int64_t t;
  float* probs;
  __device__ void operator()(int64_t r) const {
    const int64_t i = r % t;
    const float* s = scores + r * t;
    float* p = probs + r * t;
    float mx = s[0];
    for (int64_t j = 1; j <= i; ++j) mx = fmaxf(mx, s[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j <= i; ++j) sum += (p[j] = expf(s[j] - mx));
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
    for (int64_t j = i + 1; j < t; ++j) p[j] = 0.0f;
  }
};

struct CausalSoftmaxGradRow {
  const float *probs, *dprobs;
  int64_t t;
  float* dscores;
  __device__ void operator()(int64_t r) const {
    const int64_t i = r % t;
    const float *p = probs + r * t, *dp = dprobs + r * t;
    float* ds = dscores + r * t;
    float dot = 0.0f;
    for (int64_t j = 0; j <= i; ++j) dot += p[j] * dp[j];
    for (int64_t j = 0; j <= i; ++j) ds[j] = p[j] * (dp[j] - dot);
    for (int64_t j = i + 1; j < t; ++j) ds[j] = 0.0f;
  }
};

}  // namespace

// Row-major batches by gemm.cu's transpose trick: C^T = op(B)^T op(A)^T per matrix.
void gemm_batched(int device, Precision precision, bool trans_a, bool trans_b, int64_t batch,
                  int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                  float beta, float* c) {
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {  // empty products: c = beta * c
    if (beta == 0.0f)
      fill(device, c, batch * m * n, 0.0f);
    else
      scale(device, c, batch * m * n, beta);
    return;
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX)
    throw Error(str("gemm_batched: batch=", batch, " m=", m, " n=", n, " k=", k,
                    " exceeds cuBLAS's 32-bit dimensions"));
  const Context& ctx = context(device);
  const int lda = static_cast<int>(trans_a ? m : k), ldb = static_cast<int>(trans_b ? k : n);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int in = static_cast<int>(n), im = static_cast<int>(m), ik = static_cast<int>(k);
  const int count = static_cast<int>(batch);
  if (precision == Precision::kFp32) {
    MDDP_CUBLAS_CHECK(cublas().sgemm_strided_batched(ctx.blas, op_b, op_a, in, im, ik, &alpha, b,
                                                     ldb, k * n, a, lda, m * k, &beta, c, in, m * n,
                                                     count));
    return;
  }
  const cublasComputeType_t compute =
      precision == Precision::kBf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F;
  MDDP_CUBLAS_CHECK(cublas().gemm_strided_batched_ex(
      ctx.blas, op_b, op_a, in, im, ik, &alpha, b, CUDA_R_32F, ldb, k * n, a, CUDA_R_32F, lda,
      m * k, &beta, c, CUDA_R_32F, in, m * n, count, compute, CUBLAS_GEMM_DEFAULT));
}

void split_heads(int device, const float* x, const HeadDims& d, float* heads) {
  for_each_index(context(device), d.numel(), SplitHeads{x, d, heads});
}

void merge_heads(int device, const float* heads, const HeadDims& d, float* x) {
  for_each_index(context(device), d.numel(), MergeHeads{heads, d, x});
}

void causal_softmax_forward(int device, const float* scores, int64_t n, int64_t t, float* probs) {
  for_each_index(context(device), n * t, CausalSoftmaxRow{scores, t, probs});
}

void causal_softmax_backward(int device, const float* probs, const float* dprobs, int64_t n,
                             int64_t t, float* dscores) {
  for_each_index(context(device), n * t, CausalSoftmaxGradRow{probs, dprobs, t, dscores});
}

}  // namespace mddp::tensor::cuda

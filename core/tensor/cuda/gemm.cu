// GEMM through cuBLAS. cuBLAS is column-major and our tensors row-major; a
// row-major [r, c] buffer read column-major is its transpose [c, r]. So
//   C = op(A) op(B)   (row-major, C [m, n])
// is computed as the column-major product
//   C^T = op(B)^T op(A)^T   (C^T [n, m], leading dimension n),
// i.e. cuBLAS is called with the operands swapped and the same transpose
// flags; the leading dimensions are the row lengths of the row-major buffers.
#include <climits>

#include "core/common/check.h"
#include "core/tensor/cuda/cublas.cuh"
#include "core/tensor/cuda/kernels.h"
#include "core/tensor/cuda/launch.cuh"

namespace mddp::tensor::cuda {

void gemm(int device, Precision precision, bool trans_a, bool trans_b, int64_t m, int64_t n,
          int64_t k, float alpha, const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // empty product: c = beta * c, and beta = 0 must not read c (it may hold NaN)
    if (beta == 0.0f)
      fill(device, c, m * n, 0.0f);
    else
      scale(device, c, m * n, beta);
    return;
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    throw Error(str("gemm: m=", m, " n=", n, " k=", k, " exceeds cuBLAS's 32-bit dimensions"));
  const Context& ctx = context(device);
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (precision == Precision::kFp32) {
    MDDP_CUBLAS_CHECK(cublas().sgemm(ctx.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                     static_cast<int>(k), &alpha, b, ldb, a, lda, &beta, c,
                                     static_cast<int>(n)));
    return;
  }
  // fp32 in and out; the _FAST_ compute types let cuBLAS round the inputs to
  // bf16 or fp16 and run tensor-op kernels, accumulating in fp32.
  const cublasComputeType_t compute =
      precision == Precision::kBf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F;
  MDDP_CUBLAS_CHECK(cublas().gemm_ex(ctx.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                     static_cast<int>(k), &alpha, b, CUDA_R_32F, ldb, a, CUDA_R_32F,
                                     lda, &beta, c, CUDA_R_32F, static_cast<int>(n), compute,
                                     CUBLAS_GEMM_DEFAULT));
}

}  // namespace mddp::tensor::cuda

// The CPU GEMM, behind one function so the choice can change.
//
// Chosen by measurement (ANCHORS.md, bench/): on these AVX-512 machines
// oneDNN's dnnl_sgemm runs about 2x Debian's OpenBLAS (which takes the CPU for
// Haswell and uses AVX2 kernels): ~210-226 vs ~110 GFLOP/s on one core for
// the training shapes. dnnl_sgemm takes row-major matrices, like our tensors.
#include <oneapi/dnnl/dnnl.h>

#include "core/common/check.h"
#include "core/tensor/cpu/kernels.h"

namespace mddp::tensor::cpu {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // c = beta * c; oneDNN rejects k == 0
    if (beta == 0.0f) fill(c, m * n, 0.0f);
    else scale(c, m * n, beta);
    return;
  }
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a,
                                      lda, b, ldb, beta, c, n);
  MDDP_CHECK(st == dnnl_success, "dnnl_sgemm failed with status ", static_cast<int>(st), " for m=",
             m, " n=", n, " k=", k);
}

}  // namespace mddp::tensor::cpu

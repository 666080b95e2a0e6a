// The CPU GEMM, behind one function so the choice can change. Chosen by
// measurement, per CPU (docs/engine.md, bench/gemm_shapes.py):
//
//  * with AVX-512, oneDNN's dnnl_sgemm runs about 2x Debian's OpenBLAS
//    (~210-226 vs ~110 GFLOP/s on one core for the training shapes;
//    ../shared/ANCHORS.md);
//  * with AVX2 only, OpenBLAS (its Zen/Haswell kernels) is at least as fast
//    on every shape and oneDNN 2.6 halves its rate on one of ours: dx = dy·W
//    with 1024-float rows and 64-byte aligned W runs at ~50 instead of ~95
//    GFLOP/s (measured on a 2-vCPU AMD EPYC).
//
// So: oneDNN when the CPU has AVX-512F, else OpenBLAS. MICRODDP_GEMM=onednn
// or =openblas overrides the choice (for benchmarks). Both take row-major
// matrices, like our tensors.
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <cstring>

#include "core/common/check.h"
#include "core/tensor/cpu/kernels.h"

namespace mddp::tensor::cpu {
namespace {

GemmBackend choose_backend() {
  if (const char* env = std::getenv("MICRODDP_GEMM")) {
    if (std::strcmp(env, "onednn") == 0) return GemmBackend::kOneDnn;
    if (std::strcmp(env, "openblas") == 0) return GemmBackend::kOpenBlas;
    throw InputError(std::string("MICRODDP_GEMM must be onednn or openblas, got '") + env + "'");
  }
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? GemmBackend::kOneDnn : GemmBackend::kOpenBlas;
}

}  // namespace

GemmBackend gemm_backend() {
  static const GemmBackend backend = choose_backend();
  return backend;
}

const char* gemm_backend_name() {
  return gemm_backend() == GemmBackend::kOneDnn ? "oneDNN dnnl_sgemm" : "OpenBLAS cblas_sgemm";
}

void set_blas_threads(int n) { openblas_set_num_threads(n); }  // oneDNN follows OpenMP's setting

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // c = beta * c; the libraries reject or special-case k == 0
    if (beta == 0.0f) fill(c, m * n, 0.0f);
    else scale(c, m * n, beta);
    return;
  }
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  if (gemm_backend() == GemmBackend::kOpenBlas) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(n));
    return;
  }
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                      beta, c, n);
  MDDP_CHECK(st == dnnl_success, "dnnl_sgemm failed with status ", static_cast<int>(st), " for m=", m, " n=", n,
             " k=", k);
}

}  // namespace mddp::tensor::cpu

// The CPU GEMM, behind one function so the choice can change. Chosen by
// measurement, per CPU and per shape (docs/engine.md, bench/gemm_shapes.py):
//
//  * with AVX-512, oneDNN's dnnl_sgemm runs about 2x Debian's OpenBLAS
//    (~210-226 vs ~110 GFLOP/s on one core for the training shapes,
//    measured on a 2-vCPU AMD EPYC): oneDNN for every shape;
//  * with AVX2 only, OpenBLAS (its Zen/Haswell kernels) wins the big GEMMs,
//    where oneDNN 2.6 halves its rate on some (dx = dy·W with 1024-float rows
//    and 64-byte aligned W: ~40 instead of ~80 GFLOP/s, measured on a 2-vCPU
//    AMD EPYC), and oneDNN wins the small ones, whose time OpenBLAS spends
//    packing: 10-20 % at the 256-wide layers (2.8 vs 3.4 ms for a step's 47
//    GEMMs at batch 32). So oneDNN when no side exceeds kAvx2OneDnnMaxSide,
//    OpenBLAS above; at 512 oneDNN already loses some shapes. Only with one
//    compute thread: with more, the two libraries' thread pools (OpenMP's,
//    which oneDNN uses, and OpenBLAS's own) get in each other's way when
//    calls alternate between them (the CNN at --threads 2 ran 0.92x mixed,
//    1.0x on either library alone), so then OpenBLAS takes every shape.
//
// MICRODDP_GEMM=onednn or =openblas overrides the choice (for benchmarks).
// Both take row-major matrices, like our tensors.
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "core/common/check.h"
#include "core/tensor/cpu/kernels.h"

namespace mddp::tensor::cpu {
namespace {

constexpr int64_t kAvx2OneDnnMaxSide = 384;

// The one library this process uses for every shape (MICRODDP_GEMM, or
// oneDNN with AVX-512), or none: then each GEMM goes by its shape.
std::optional<GemmBackend> choose_fixed_backend() {
  if (const char* env = std::getenv("MICRODDP_GEMM")) {
    if (std::strcmp(env, "onednn") == 0) return GemmBackend::kOneDnn;
    if (std::strcmp(env, "openblas") == 0) return GemmBackend::kOpenBlas;
    throw InputError(std::string("MICRODDP_GEMM must be onednn or openblas, got '") + env + "'");
  }
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return GemmBackend::kOneDnn;
  return std::nullopt;
}

std::optional<GemmBackend> fixed_backend() {
  static const std::optional<GemmBackend> fixed = choose_fixed_backend();
  return fixed;
}

}  // namespace

GemmBackend gemm_backend(int64_t m, int64_t n, int64_t k) {
  if (const auto fixed = fixed_backend()) return *fixed;
  if (omp_get_max_threads() > 1) return GemmBackend::kOpenBlas;
  return std::max({m, n, k}) <= kAvx2OneDnnMaxSide ? GemmBackend::kOneDnn : GemmBackend::kOpenBlas;
}

const char* gemm_backend_name(GemmBackend b) {
  return b == GemmBackend::kOneDnn ? "oneDNN dnnl_sgemm" : "OpenBLAS cblas_sgemm";
}

std::string gemm_policy() {
  if (const auto fixed = fixed_backend()) return gemm_backend_name(*fixed);
  const char* blas = gemm_backend_name(GemmBackend::kOpenBlas);
  return str(gemm_backend_name(GemmBackend::kOneDnn), " up to ", kAvx2OneDnnMaxSide, " on a side, ",
             blas, " above (with one compute thread; with more, ", blas, ")");
}

// Note [OpenBLAS's idle threads]
// Debian's OpenBLAS (its pthread build) starts a thread per core as it is
// loaded, before main, and each spins (sched_yield) a while before it
// sleeps: about 70 ms of CPU in every process on 2 cores (a one-step
// `train` took 175 ms of CPU, 104 ms with the pool stopped), and a
// spinning thread per core in every rank of a big host, where the ranks
// start together. A process here computes on one thread unless --threads
// asks for more. So OpenBLAS's threads are stopped, with the call its own
// fork handler uses, once the libraries are initialised (a constructor of
// the executable runs after theirs), and again after each setting of one
// thread (openblas_set_num_threads starts the pool it finds stopped); a
// setting of more starts them, and they serve the GEMMs. Weak: a BLAS
// build without threads has no such function, and nothing to stop.
extern "C" __attribute__((weak)) void blas_thread_shutdown_();
namespace {
__attribute__((constructor)) void stop_blas_threads() {
  if (blas_thread_shutdown_ != nullptr) blas_thread_shutdown_();
}
}  // namespace

void set_blas_threads(int n) {
  openblas_set_num_threads(n);
  if (n == 1) stop_blas_threads();
}  // oneDNN follows OpenMP's setting

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // c = beta * c; the libraries reject or special-case k == 0
    if (beta == 0.0f)
      fill(c, m * n, 0.0f);
    else
      scale(c, m * n, beta);
    return;
  }
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  if (gemm_backend(m, n, k) == GemmBackend::kOpenBlas) {
    cblas_sgemm(
        CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
        static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
        static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(n));
    return;
  }
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a,
                                      lda, b, ldb, beta, c, n);
  MDDP_CHECK(st == dnnl_success, "dnnl_sgemm failed with status ", static_cast<int>(st),
             " for m=", m, " n=", n, " k=", k);
}

}  // namespace mddp::tensor::cpu

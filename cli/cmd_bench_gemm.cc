// `microddp bench gemm`: the single-core SGEMM rate of the GEMM microddp
// uses (core/tensor/cpu/gemm.cc), for the training step's lower bound:
// a step cannot beat its FLOPs divided by this rate.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "core/common/check.h"
#include "core/common/rng.h"
#include "core/common/timer.h"
#include "core/tensor/ops.h"

namespace mddp::cli {

void register_bench_gemm(CLI::App& bench) {
  struct Opts {
    int64_t m = 256, n = 1024, k = 1024;
    int iters = 20;
    int threads = 1;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      bench.add_subcommand("gemm", "SGEMM GFLOP/s of microddp's CPU GEMM (best of --iters)");
  cmd->add_option("-m", o->m, "rows of A and C")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("-n", o->n, "columns of B and C")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("-k", o->k, "inner dimension")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("--iters", o->iters, "repetitions (the best is reported)")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "compute threads")
      ->check(CLI::Range(1, kMaxThreads))
      ->capture_default_str();
  cmd->footer(
      "The library is chosen per CPU and shape (oneDNN with AVX-512; with AVX2 only and one "
      "thread, oneDNN "
      "up to 384 on a side and OpenBLAS above; with more threads, OpenBLAS); "
      "MICRODDP_GEMM=onednn|openblas "
      "overrides.");
  cmd->callback([o] {
    tensor::set_num_threads(o->threads);
    Rng rng(1);
    auto random = [&](int64_t r, int64_t c) {
      std::vector<float> v(r * c);
      for (float& x : v) x = rng.uniform(-1, 1);
      return tensor::Tensor::from_vector({r, c}, v);
    };
    tensor::Tensor a = random(o->m, o->k), b = random(o->k, o->n),
                   c = tensor::Tensor::zeros({o->m, o->n});
    double best = 1e30;
    for (int i = 0; i < o->iters + 1; ++i) {  // one extra, untimed warm-up
      const int64_t t0 = now_ns();
      tensor::gemm(false, false, 1.0f, a, b, 0.0f, c);
      if (i > 0) best = std::min(best, (now_ns() - t0) * 1e-9);
    }
    const double gflops = 2.0 * o->m * o->n * o->k / best * 1e-9;
    std::printf("gemm %lldx%lldx%lld (%s): best %.3f ms, %.1f GFLOP/s (%d thread%s)\n",
                static_cast<long long>(o->m), static_cast<long long>(o->n),
                static_cast<long long>(o->k), tensor::gemm_backend_name(o->m, o->n, o->k),
                best * 1e3, gflops, o->threads, o->threads == 1 ? "" : "s");
  });
}

}  // namespace mddp::cli

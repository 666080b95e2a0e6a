#include "cli/commands.h"

namespace mddp::cli {

// `microddp bench <what>`: benchmarks that also verify (nccl-tests style).
void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (all-reduce, training throughput)");
  bench->require_subcommand(1);
  register_bench_train(*bench);
  register_bench_gemm(*bench);
  register_bench_allreduce(*bench);
}

}  // namespace mddp::cli

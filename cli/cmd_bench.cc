#include "cli/commands.h"

namespace mddp::cli {

// `microddp bench <what>`: benchmarks that also verify (nccl-tests style).
void register_bench(CLI::App& app) {
  register_group(app, "bench", "Benchmarks (all-reduce, training throughput)",
                 {register_bench_train, register_bench_gemm, register_bench_allreduce});
}

}  // namespace mddp::cli

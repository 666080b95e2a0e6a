// `microddp bench allreduce --backend nccl`: the same sweep (bench_sweep.h)
// over NCCL, one process per local GPU (rank r on cuda:r), with its buffer
// on the GPU. cmd_bench_allreduce.cc owns the flags; this file owns the GPU
// buffer and NCCL's table.
#pragma once

#include <cstdint>
#include <string>

#include "cli/bench_sweep.h"

namespace mddp::cli {

// Runs the sweep on `nproc` local ranks and prints the table (rank 0); also
// writes it to `json` unless "". Throws if any rank failed or an element was
// wrong.
void run_allreduce_nccl(int nproc, const SweepOptions& sweep, int64_t timeout_ms,
                        const std::string& json);

}  // namespace mddp::cli

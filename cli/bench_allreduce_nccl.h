// `microddp bench allreduce --backend nccl`: the same sweep over NCCL, one
// process per local GPU (rank r on cuda:r). cmd_bench_allreduce.cc owns the
// flags and hands them over with its data pattern and checker, so both
// backends verify the same way; this file owns the GPU driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm/types.h"

namespace mddp::cli {

struct NcclSweep {
  int nproc = 1;
  std::vector<std::size_t> sizes;
  comm::DataType dtype = comm::DataType::kFloat32;
  int iters = 20, warmup = 5;
  int64_t timeout_ms = 60'000;
  std::string json;  // also write the results here
  // Fills data[count] with rank `rank`'s pattern; counts the elements of
  // data[count] that differ from the exact sum over n ranks.
  void (*fill)(comm::DataType, std::byte* data, int64_t count, int rank) = nullptr;
  int64_t (*count_wrong)(comm::DataType, const std::byte* data, int64_t count, int n) = nullptr;
};

// Runs the sweep on sweep.nproc local ranks and prints the table (rank 0).
// Throws if any rank failed or an element was wrong.
void run_allreduce_nccl(const NcclSweep& sweep);

}  // namespace mddp::cli

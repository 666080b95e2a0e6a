// The all-reduce sweep of `microddp bench allreduce`, whichever backend runs
// it (cpu and gloo from cmd_bench_allreduce.cc, nccl from
// cmd_bench_allreduce_nccl.cc): one loop over a comm::ProcessGroup, a buffer
// in host or GPU memory behind SweepBuffer, nccl-tests' bandwidths and its
// footer under the table.
//
// Per size: one checked all-reduce of integer-valued data (its exact sum is
// known, so #wrong counts every element that differs), then --warmup
// untimed and --iters timed all-reduces issued back to back and waited for
// at the end; the time is the slowest rank's mean.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/comm/types.h"

namespace mddp::cli {

// The bandwidths of one all-reduce of `bytes` that took time_us on n ranks,
// in GB/s: algbw = bytes / time, and busbw = algbw * 2(n-1)/n, the bytes each
// rank's link carries per byte of the buffer (nccl-tests, PERFORMANCE.md).
struct Bandwidth {
  double algbw = 0, busbw = 0;
};

inline Bandwidth allreduce_bandwidth(std::size_t bytes, double time_us, int n) {
  const double algbw = time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0.0;
  return {algbw, algbw * 2.0 * (n - 1) / n};
}

// The buffer a sweep all-reduces. The pattern is written and checked in
// host memory (host()); a GPU buffer copies it to and from the device.
class SweepBuffer {
 public:
  virtual ~SweepBuffer() = default;
  virtual void* data() = 0;                  // what the all-reduce gets
  virtual std::byte* host() = 0;             // where the pattern is written and checked
  virtual void to_data() = 0;                // host() -> data() (nothing in host memory)
  virtual void from_data() = 0;              // data() -> host()
  virtual void zero(std::size_t bytes) = 0;  // the first `bytes` of data()
};
// A buffer of `bytes` in host memory (the cpu and gloo backends): in
// `group`'s shared memory where it has some (ProcessGroup::allocate_shared,
// as DDP's buckets are), else private.
std::unique_ptr<SweepBuffer> host_buffer(std::size_t bytes, comm::ProcessGroup* group = nullptr);

// The bytes a buffer needs for the largest message of `sizes` in `dtype`.
std::size_t sweep_buffer_bytes(const std::vector<std::size_t>& sizes, comm::DataType dtype);

struct SweepOptions {
  std::vector<std::size_t> sizes;  // message sizes in bytes, increasing
  comm::DataType dtype = comm::DataType::kFloat32;
  int iters = 20, warmup = 5;
};

// One size of the sweep, as every rank agrees on it.
struct SweepRow {
  std::size_t bytes = 0;
  int64_t count = 0;
  std::string algo;  // the algorithm that ran (microddp's groups; else the op)
  double time_us = 0, algbw = 0, busbw = 0;
  int64_t wrong = 0;
  int64_t cross_host_bytes = -1;  // -1: one host, or not microddp's group
};

// Runs the sweep on this rank's group; on_row(row) is called on every rank
// as each size is done (rank 0 prints it). Collective.
std::vector<SweepRow> run_sweep(comm::ProcessGroup& group, SweepBuffer& buffer,
                                const SweepOptions& options,
                                const std::function<void(const SweepRow&)>& on_row);

struct SweepTotals {
  int64_t wrong = 0;     // elements that differed from the exact result, over all sizes
  double avg_busbw = 0;  // GB/s, the mean over sizes (what nccl-tests prints)
  bool ok() const { return wrong == 0; }
};
SweepTotals totals_of(const std::vector<SweepRow>& rows);

void print_footer(const SweepTotals& t);

}  // namespace mddp::cli

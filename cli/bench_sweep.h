// What the CPU and NCCL all-reduce sweeps (`microddp bench allreduce`) share:
// the nccl-tests-style footer under the table.
#pragma once

#include <cstdint>
#include <cstdio>

namespace mddp::cli {

struct SweepTotals {
  int64_t wrong = 0;      // elements that differed from the exact result, over all sizes
  double avg_busbw = 0;   // GB/s, the mean over sizes (what nccl-tests prints)
  bool ok() const { return wrong == 0; }
};

// `rows` are the sweep's rows, each with `wrong` and `busbw`.
template <typename Rows>
SweepTotals totals_of(const Rows& rows) {
  SweepTotals t;
  double sum_busbw = 0;
  for (const auto& r : rows) t.wrong += r.wrong, sum_busbw += r.busbw;
  t.avg_busbw = rows.empty() ? 0.0 : sum_busbw / static_cast<double>(rows.size());
  return t;
}

inline void print_footer(const SweepTotals& t) {
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(t.wrong), t.ok() ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %.3f GB/s\n#\n%s\n", t.avg_busbw, t.ok() ? "OK" : "FAILED");
  std::fflush(stdout);
}

}  // namespace mddp::cli

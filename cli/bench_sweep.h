// What the CPU and NCCL all-reduce sweeps (`microddp bench allreduce`) share:
// nccl-tests' bandwidths and its footer under the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

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

struct SweepTotals {
  int64_t wrong = 0;     // elements that differed from the exact result, over all sizes
  double avg_busbw = 0;  // GB/s, the mean over sizes (what nccl-tests prints)
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
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(t.wrong),
              t.ok() ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %.3f GB/s\n#\n%s\n", t.avg_busbw, t.ok() ? "OK" : "FAILED");
  std::fflush(stdout);
}

}  // namespace mddp::cli

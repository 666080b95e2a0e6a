// Validators for numeric flags, attached where a flag is defined. CLI11's
// own Range and PositiveNumber let "nan" through (every comparison with NaN
// is false) and "inf" through an open end, so floating-point flags use these.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>

namespace mddp::cli {

inline constexpr double kNoLimit = std::numeric_limits<double>::max();
// Bounds of the integer flags that size what a process starts (checked with
// CLI::Range): ranks forked on this host, compute threads (OpenMP crashes
// when it cannot start the threads it is asked for), and any timeout.
inline constexpr int kMaxLocalRanks = 256;
inline constexpr int kMaxThreads = 1024;
inline constexpr int64_t kMaxTimeoutMs = int64_t{7} * 24 * 3600 * 1000;  // a week

// A finite number in [lo, hi].
CLI::Validator finite_in(double lo, double hi = kNoLimit);
// A finite number > lo.
CLI::Validator finite_above(double lo);
// A --compress spelling (ddp::parse_compression: none, fp16, bf16, topk:RATIO, powersgd:RANK).
CLI::Validator compression_spec();

}  // namespace mddp::cli

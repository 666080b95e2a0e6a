// Validators for numeric flags, attached where a flag is defined. CLI11's
// own Range and PositiveNumber let "nan" through (every comparison with NaN
// is false) and "inf" through an open end, so floating-point flags use these.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

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
// A duration in seconds, > 0 and at most kMaxTimeoutMs: what the code then
// turns into milliseconds must fit (--join-timeout-s 1e300 is refused).
CLI::Validator timeout_seconds();
// A whole number in [lo, hi], in digits or with an exponent ("5e6", as the
// README writes sizes): rewritten as digits before CLI11 converts it. Refuses
// a fraction, and a minus sign or overflow that CLI11 would wrap or clamp
// (--seed -1 is not 2^64-1, --steps 1e20 is not INT64_MAX). Attach it with
// ->transform(): ->check() would drop the rewrite.
CLI::Validator whole_number_in(int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max());
// An integer flag's lower bound, said as one ("'-3' is less than 1"):
// CLI11's PositiveNumber and NonNegativeNumber name a range up to DBL_MAX
// printed in full. A value that is no number is left to the type check.
CLI::Validator at_least(int64_t lo);
// An identifier sent to other processes (--job-id): 1 to max_bytes bytes,
// checked here rather than where a peer refuses it.
CLI::Validator identifier(std::size_t max_bytes);
// --job-id: an identifier of the data plane's handshake's limit.
CLI::Validator job_id_check();
// --nproc: ranks forked on this host, at most local_rank_cap() (see there).
CLI::Validator local_ranks();
// Ranks one host runs well: 16 per CPU the process may use, and never more
// than kMaxLocalRanks (each rank is a process with its buffers, shared
// memory segments and connections to every other).
int local_rank_cap();
// MemAvailable of /proc/meminfo in bytes (nullopt: unknown): what a
// command may ask for without pushing the machine into swap or the OOM killer.
std::optional<uint64_t> available_memory_bytes();
// A --compress spelling (ddp::parse_compression: none, fp16, bf16, topk:RATIO, powersgd:RANK).
CLI::Validator compression_spec();

}  // namespace mddp::cli

// Goodput: the share of wall time spent on steps that count. A step that
// counts is one the final model went through: a step computed again after
// a restart from a checkpoint counts once (its last computation), one
// abandoned in flight when a rank died never reported and does not count.
// Each attempt's time runs from the start of its first step to the end of
// its last (over all its ranks: per-rank step times overlap, as a rank
// waits in a step for another's previous one), and counts in the share of
// its steps that count. The wall time runs from the first step's start to
// the last step's end; what is not goodput is recovery: detection,
// re-forming, heals, checkpoints read, steps redone. Fed record by record
// (the dashboard's tracker) or from a whole metrics.jsonl (`microddp analyze`).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <unordered_map>

namespace mddp::perf {

class Goodput {
 public:
  // A training record of `attempt` for `step`, `step_ms` long, ending at
  // `end_unix_ns` (the coordinator's clock).
  void add(int attempt, int64_t step, double step_ms, int64_t end_unix_ns);
  double counted_s() const;
  double wall_s() const;
  // counted_s() / wall_s(), in [0, 1]; 0 before any record.
  double value() const;

 private:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  struct Span {
    int64_t start_ns = kNone, end_ns = 0;  // of its first step, its last
    int64_t first_step = kNone, last_step = 0;
    int64_t owned = 0;  // its steps that no later attempt computed again
  };
  std::map<int, Span> attempts_;
  // By step: the latest attempt that reported it. A map, not a vector by
  // step: a damaged record's step of 1e15 must not allocate 1e15 entries.
  std::unordered_map<int64_t, int> owner_;
  int64_t start_ns_ = kNone, end_ns_ = 0;
};

}  // namespace mddp::perf

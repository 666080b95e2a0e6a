// Goodput: the share of wall time spent on steps that count. A step that
// counts is one the final model went through: a step computed again after
// a restart from a checkpoint counts once (its last computation), one
// abandoned in flight when a rank died never reported and does not count.
// Each step counts for its duration (the longest any rank of its attempt
// reported); the wall time runs from the start of the first step to the
// end of the last. What is not a step that counts is recovery: detection,
// re-forming, heals, checkpoints written and read, steps redone.
// Fed record by record (the dashboard's tracker) or from a whole
// metrics.jsonl (`microddp analyze`).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace mddp::perf {

class Goodput {
 public:
  // A training record of `attempt` for `step`, `step_ms` long, ending at
  // `end_unix_ns` (the coordinator's clock).
  void add(int attempt, int64_t step, double step_ms, int64_t end_unix_ns);
  double counted_s() const { return counted_ms_ / 1e3; }
  double wall_s() const;
  // counted_s() / wall_s(), in [0, 1]; 0 before any record.
  double value() const;

 private:
  struct Step {
    int attempt = -1;
    double ms = 0;
  };
  std::vector<Step> steps_;  // by step number
  double counted_ms_ = 0;
  int64_t first_start_ns_ = std::numeric_limits<int64_t>::max(), last_end_ns_ = 0;
};

}  // namespace mddp::perf

#include "core/perf/goodput.h"

#include <algorithm>

namespace mddp::perf {

void Goodput::add(int attempt, int64_t step, double step_ms, int64_t end_unix_ns) {
  if (step < 1 || end_unix_ns <= 0) return;
  const auto i = static_cast<std::size_t>(step);
  if (steps_.size() <= i) steps_.resize(i + 1);
  Step& s = steps_[i];
  // A later attempt's computation of the step replaces the earlier one's.
  if (attempt > s.attempt) {
    counted_ms_ -= s.ms;
    s = {attempt, 0};
  }
  if (attempt == s.attempt && step_ms > s.ms) {
    counted_ms_ += step_ms - s.ms;
    s.ms = step_ms;
  }
  const int64_t start_ns = end_unix_ns - static_cast<int64_t>(step_ms * 1e6);
  first_start_ns_ = std::min(first_start_ns_, start_ns);
  last_end_ns_ = std::max(last_end_ns_, end_unix_ns);
}

double Goodput::wall_s() const {
  return last_end_ns_ > first_start_ns_ ? (last_end_ns_ - first_start_ns_) * 1e-9 : 0.0;
}

double Goodput::value() const {
  const double wall = wall_s();
  return wall > 0 ? std::min(1.0, counted_s() / wall) : 0.0;
}

}  // namespace mddp::perf

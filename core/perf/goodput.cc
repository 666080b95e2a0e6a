#include "core/perf/goodput.h"

#include <algorithm>
#include <cmath>

namespace mddp::perf {

void Goodput::add(int attempt, int64_t step, double step_ms, int64_t end_unix_ns) {
  if (step < 1 || end_unix_ns <= 0) return;
  // A damaged record's duration (NaN, negative, 1e96) must not overflow the
  // start: a step is taken to last at most a day.
  constexpr double kDayMs = 86'400e3;
  const double ms = std::isfinite(step_ms) ? std::clamp(step_ms, 0.0, kDayMs) : 0.0;
  const int64_t start_ns = end_unix_ns - static_cast<int64_t>(ms * 1e6);
  Span& a = attempts_[attempt];
  a.start_ns = std::min(a.start_ns, start_ns);
  a.end_ns = std::max(a.end_ns, end_unix_ns);
  a.first_step = std::min(a.first_step, step);
  a.last_step = std::max(a.last_step, step);
  start_ns_ = std::min(start_ns_, start_ns);
  end_ns_ = std::max(end_ns_, end_unix_ns);
  // A later attempt's computation of the step replaces the earlier one's.
  const auto [it, first] = owner_.try_emplace(step, attempt);
  if (!first) {
    if (it->second >= attempt) return;
    --attempts_[it->second].owned;
    it->second = attempt;
  }
  ++a.owned;
}

double Goodput::counted_s() const {
  double s = 0;
  for (const auto& [attempt, a] : attempts_)
    s += (a.end_ns - a.start_ns) * 1e-9 * static_cast<double>(a.owned) /
         static_cast<double>(a.last_step - a.first_step + 1);
  return s;
}

double Goodput::wall_s() const {
  return end_ns_ > start_ns_ ? (end_ns_ - start_ns_) * 1e-9 : 0.0;
}

double Goodput::value() const {
  const double wall = wall_s();
  return wall > 0 ? std::min(1.0, counted_s() / wall) : 0.0;
}

}  // namespace mddp::perf

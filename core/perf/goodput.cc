#include "core/perf/goodput.h"

#include <algorithm>

namespace mddp::perf {

void Goodput::add(int attempt, int64_t step, double step_ms, int64_t end_unix_ns) {
  if (step < 1 || end_unix_ns <= 0) return;
  const int64_t start_ns = end_unix_ns - static_cast<int64_t>(step_ms * 1e6);
  Span& a = attempts_[attempt];
  a.start_ns = std::min(a.start_ns, start_ns);
  a.end_ns = std::max(a.end_ns, end_unix_ns);
  a.first_step = std::min(a.first_step, step);
  a.last_step = std::max(a.last_step, step);
  start_ns_ = std::min(start_ns_, start_ns);
  end_ns_ = std::max(end_ns_, end_unix_ns);
  const auto i = static_cast<std::size_t>(step);
  if (owner_.size() <= i) owner_.resize(i + 1, -1);
  // A later attempt's computation of the step replaces the earlier one's.
  if (owner_[i] >= attempt) return;
  if (owner_[i] >= 0) --attempts_[owner_[i]].owned;
  owner_[i] = attempt;
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

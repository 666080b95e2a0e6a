#include "core/nn/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace mddp::nn {

float lr_at(const LrSchedule& s, int64_t step) {
  if (step <= s.warmup)
    return static_cast<float>(static_cast<double>(s.lr) * static_cast<double>(step) /
                              static_cast<double>(s.warmup));
  if (s.lr_min < 0.0f) return s.lr;
  // Progress through the decay, in (0, 1]: 1 at the last step, and beyond it.
  const double span = static_cast<double>(std::max<int64_t>(1, s.total - s.warmup));
  const double progress = std::min(1.0, static_cast<double>(step - s.warmup) / span);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));  // 1 -> 0
  return static_cast<float>(s.lr_min + cosine * (static_cast<double>(s.lr) - s.lr_min));
}

}  // namespace mddp::nn

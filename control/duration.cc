#include "control/duration.h"

#include <cstdio>

namespace mddp::control {

std::string format_duration(std::chrono::steady_clock::duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  char buf[32];
  if (ms < 1000 && ms > -1000)
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(ms));
  else
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace mddp::control

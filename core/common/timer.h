// Monotonic time for phase timers and spans.
#pragma once

#include <chrono>
#include <cstdint>

namespace mddp {

// Nanoseconds on the steady clock (never jumps; comparable within one host).
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double ns_to_ms(int64_t ns) {
  return static_cast<double>(ns) * 1e-6;
}

}  // namespace mddp

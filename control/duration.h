// Durations in the control plane's messages, alike on both sides.
#pragma once

#include <chrono>
#include <string>

namespace mddp::control {

// "1.5 s" or "250 ms": durations in messages.
std::string format_duration(std::chrono::steady_clock::duration d);

}  // namespace mddp::control

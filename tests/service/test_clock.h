// The fixed "now" the coordinator's state tests hand to the code under test
// (which takes its time as an argument): one for every test file, so no
// file needs its own.
#pragma once

#include "coordinator/outcome.h"  // Clock, TimePoint

namespace mddp::coordinator {

inline const TimePoint t0 = Clock::now();

}  // namespace mddp::coordinator

// The microddp binary a test starts as a process: $MDDP_MICRODDP when set,
// so the tests of a relocated release run its own binary (scripts/gpu-check
// sets it for the bundled GPU tests), else the one this build made
// (compiled in by mddp_test's RUNS_MICRODDP, tests/CMakeLists.txt).
#pragma once

#include <cstdlib>
#include <string>

#ifndef MDDP_MICRODDP_BUILT
#error "MDDP_MICRODDP_BUILT must name the built microddp binary (mddp_test ... RUNS_MICRODDP)"
#endif

namespace mddp::test {

inline std::string microddp_binary() {
  const char* relocated = std::getenv("MDDP_MICRODDP");
  return relocated != nullptr && *relocated != '\0' ? relocated : MDDP_MICRODDP_BUILT;
}

}  // namespace mddp::test

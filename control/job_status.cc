#include "control/job_status.h"

namespace mddp::control {

const char* to_string(State s) {
  switch (s) {
    case State::kForming:
      return "forming";
    case State::kRunning:
      return "running";
    case State::kRestarting:
      return "restarting";
    case State::kSucceeded:
      return "succeeded";
    case State::kFailed:
      return "failed";
  }
  return "?";
}

}  // namespace mddp::control

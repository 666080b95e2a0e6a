#include "control/verdict.h"

namespace mddp::control {

const char* to_string(Cause c) {
  switch (c) {
    case Cause::kNone:
      return "none";
    case Cause::kRankError:
      return "rank error";
    case Cause::kProcessDied:
      return "process died";
    case Cause::kHeartbeatTimeout:
      return "heartbeat timeout";
    case Cause::kLinkBroken:
      return "link broken";
    case Cause::kCoordinatorStalled:
      return "coordinator stalled";
    case Cause::kModelMismatch:
      return "model mismatch";
    case Cause::kRendezvousTimeout:
      return "rendezvous timeout";
    case Cause::kShutdown:
      return "shutdown";
    case Cause::kGrow:
      return "grow";
  }
  return "?";
}

bool restartable(Cause c) {
  return c == Cause::kProcessDied || c == Cause::kHeartbeatTimeout || c == Cause::kLinkBroken;
}

int Verdict::failed_rank() const {
  switch (cause) {
    case Cause::kRankError:
    case Cause::kProcessDied:
    case Cause::kHeartbeatTimeout:
    case Cause::kModelMismatch:
      return rank;
    default:
      return -1;
  }
}

}  // namespace mddp::control

// The job's state as both sides speak it: FORMING (rendezvous) -> RUNNING
// -> SUCCEEDED | FAILED, in attempts; RESTARTING is what a session of an
// attempt that ended hears (that rank joins again). The coordinator's
// state machine is coordinator/job_state.h; the worker reads the status
// from its heartbeat replies and its Watch stream.
#pragma once

#include <string>

#include "control/verdict.h"

namespace mddp::control {

enum class State { kForming, kRunning, kRestarting, kSucceeded, kFailed };
const char* to_string(State s);

struct JobStatus {
  State state = State::kForming;
  // When kFailed: why (Verdict), with its one line naming the rank and host;
  // when kRestarting: why that session's attempt ended.
  Verdict verdict;
  int attempt = 0;  // the job's attempt now (0 first)

  const std::string& failure() const { return verdict.message; }
  int failed_rank() const { return verdict.failed_rank(); }  // -1: not one rank's fault
  bool terminal() const { return state == State::kSucceeded || state == State::kFailed; }
};

}  // namespace mddp::control

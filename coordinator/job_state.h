// The job's life: FORMING (rendezvous) -> RUNNING -> SUCCEEDED | FAILED.
// Terminal states are final and the first failure wins, so the message a
// worker hears in its heartbeat is the root cause, not an echo of it.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>

#include "coordinator/outcome.h"
#include "coordinator/verdict.h"

namespace mddp::coordinator {

enum class State { kForming, kRunning, kSucceeded, kFailed };
const char* to_string(State s);

struct JobStatus {
  State state = State::kForming;
  Verdict verdict;  // when kFailed: why (Verdict), with its one line naming the rank and host

  const std::string& failure() const { return verdict.message; }
  int failed_rank() const { return verdict.failed_rank(); }  // -1: not one rank's fault
  bool terminal() const { return state == State::kSucceeded || state == State::kFailed; }
};

class JobState {
 public:
  JobStatus status() const;
  // FORMING -> RUNNING; no-op in any other state.
  void set_running();
  // RUNNING -> SUCCEEDED; false (no change) in any other state.
  bool succeed();
  // Any non-terminal state -> FAILED. Returns true when this call failed the
  // job (the caller then aborts the waits), false when it was already terminal.
  bool fail(Verdict verdict);
  // Blocks until the state is terminal or `deadline`; returns the status.
  JobStatus wait_terminal(TimePoint deadline) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  JobStatus status_;
};

}  // namespace mddp::coordinator

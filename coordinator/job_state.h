// The job's life: FORMING (rendezvous) -> RUNNING -> SUCCEEDED | FAILED,
// in attempts: a restart (coordinator/attempt.h) takes FORMING or RUNNING
// back to FORMING with the next attempt number. Terminal states are final
// and the first failure wins, so the message a worker hears in its
// heartbeat is the root cause, not an echo of it. RESTARTING is never the
// job's own state: it is what a session of an attempt that ended hears
// (that rank joins again). Thread-safe.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>

#include "control/job_status.h"
#include "coordinator/outcome.h"

namespace mddp::coordinator {

class JobState {
 public:
  JobStatus status() const;
  // The first attempt's number (a coordinator that resumes a run goes on
  // counting where the run's metrics log stopped); call before any other.
  void set_first_attempt(int attempt);
  // FORMING -> RUNNING; no-op in any other state.
  void set_running();
  // FORMING or RUNNING -> FORMING of attempt `attempt`. False (no change)
  // once terminal.
  bool restart(int attempt);
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

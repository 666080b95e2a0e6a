// What `microddp run` decides about its children, as a pure state machine:
// no processes, no clock of its own, no output. cmd_run.cc feeds it what it
// reaped and the time at every tick, and does what it says (start a worker
// again, SIGTERM, SIGKILL); the outcome of the whole run and its exit code
// come from the children's final statuses. Tested without a process
// (tests/cli/run_policy_test.cc).
//
// Children: index 0 is the coordinator, 1 + r is rank r. A status is an
// exit code, or 128 + the signal that ended the child.
//
// Restarts (--max-restarts K, handed to the coordinator too): a worker that
// died of a signal, or exited kExitRestart because its attempt ended
// (another rank died), is started again while the coordinator runs, at most
// K times per rank; it re-joins and the coordinator re-forms the job
// (Note [Attempts] in coordinator/job.cc). Elastic (--min-nproc): a worker
// gone for good ends nothing by itself; the coordinator re-forms the job
// without it, or fails it (and then exits too).
//
// Escalation: a failed child gives the others `grace` (one heartbeat
// timeout and a margin) to hear the verdict and exit by themselves; then
// (at once on SIGINT/SIGTERM) the workers get SIGTERM (they leave, saying
// so), then the coordinator, and whatever is still there 3 s later SIGKILL.
// With --http-linger the coordinator outlives the workers by that long
// (unless interrupted), serving the final state of the job.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

namespace mddp::cli {

using RunClock = std::chrono::steady_clock;

// One child as `run` last reaped it.
struct ChildState {
  bool done = false;
  int status = 0;  // when done: the exit code, or 128 + signal
};

struct RunPolicyOptions {
  int max_restarts = 0;  // per rank
  bool elastic = false;  // --min-nproc: the coordinator decides about a lost worker
  // --on-failure shrink: a worker that died is not started again (the others
  // went on without it); one that left an ended attempt (exit 75) still is.
  bool shrink = false;
  RunClock::duration grace{};   // after a failure, before the workers are stopped
  RunClock::duration linger{};  // --http-linger: the coordinator serves this long after the workers
};

// What to do at this tick, in this order.
struct RunActions {
  std::vector<int> restart;   // children (1 + rank) to start again, their restart counted
  bool stop_workers = false;  // SIGTERM every worker still running
  bool say_linger = false;    // the workers are done; the dashboard stays up (said once)
  bool stop_all = false;      // SIGTERM every child still running
  bool kill_all = false;      // SIGKILL every child still running
};

class RunPolicy {
 public:
  RunPolicy(int workers, RunPolicyOptions options);
  // `children` as just reaped (a child restarted now counts as running);
  // `interrupted`: run caught SIGINT or SIGTERM.
  RunActions tick(const std::vector<ChildState>& children, bool interrupted,
                  RunClock::time_point now);
  int restarts(int child) const { return restarts_[static_cast<std::size_t>(child)]; }

 private:
  bool restartable(const std::vector<ChildState>& children, int i) const;
  bool failed(const std::vector<ChildState>& children) const;
  void escalate(const std::vector<ChildState>& children, bool interrupted, RunClock::time_point now,
                RunActions& actions);

  const RunPolicyOptions options_;
  std::vector<int> restarts_;  // by child
  std::optional<RunClock::time_point> stop_workers_at_, stop_all_at_, kill_at_;
  bool workers_stopped_ = false, linger_said_ = false;
};

// How the whole run ended, from its children's final statuses.
struct RunOutcome {
  enum class End { kSucceeded, kRecordsLost, kFailed, kInterrupted };
  End end = End::kSucceeded;
  int signal = 0;           // kInterrupted: SIGINT or SIGTERM
  std::vector<int> failed;  // children that failed the job
  std::vector<int> lost;    // finished, but their records are not all on disk
  std::vector<int> gone;    // elastic: workers the job finished without
  // The exit status of `run`: 0, kExitRecordsLost, 1, or 128 + the signal.
  int exit_code() const;
};
RunOutcome run_outcome(const std::vector<ChildState>& children, bool elastic, int interrupted);

}  // namespace mddp::cli

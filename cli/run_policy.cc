#include "cli/run_policy.h"

#include "control/exit_status.h"

namespace mddp::cli {
namespace {

constexpr int kCoordinator = 0;
constexpr auto kTermToKill = std::chrono::seconds(3);    // SIGTERM to all, then SIGKILL
constexpr auto kWorkersToAll = std::chrono::seconds(5);  // SIGTERM to the workers, then to all

}  // namespace

RunPolicy::RunPolicy(int workers, RunPolicyOptions options)
    : options_(options), restarts_(static_cast<std::size_t>(workers) + 1, 0) {}

// A worker that died of a signal or left its ended attempt joins again while
// the job goes on; the coordinator decides whether it is taken.
bool RunPolicy::restartable(const std::vector<ChildState>& children, int i) const {
  const ChildState& c = children[static_cast<std::size_t>(i)];
  const bool died = c.status > 128;
  return i != kCoordinator && c.done &&
         (c.status == control::kExitRestart || (died && !options_.shrink)) &&
         !children[kCoordinator].done && restarts(i) < options_.max_restarts && !stop_workers_at_;
}

// A child that failed the job: one that ended badly, but for records lost
// (the work was done) and, elastic, a worker the coordinator decides about.
bool RunPolicy::failed(const std::vector<ChildState>& children) const {
  for (std::size_t i = 0; i < children.size(); ++i) {
    const ChildState& c = children[i];
    const bool coordinator_decides =
        options_.elastic && i != kCoordinator && !children[kCoordinator].done;
    if (c.done && c.status != 0 && c.status != control::kExitRecordsLost && !coordinator_decides)
      return true;
  }
  return false;
}

RunActions RunPolicy::tick(const std::vector<ChildState>& reaped, bool interrupted,
                           RunClock::time_point now) {
  RunActions actions;
  std::vector<ChildState> children = reaped;
  for (int i = 0; i < static_cast<int>(children.size()); ++i) {
    if (!restartable(children, i)) continue;
    ++restarts_[static_cast<std::size_t>(i)];
    actions.restart.push_back(i);
    children[static_cast<std::size_t>(i)] = ChildState{};  // running again
  }
  escalate(children, interrupted, now, actions);
  return actions;
}

// The stops in order: the workers (at once when interrupted, after `grace`
// when a child failed), then every child, then SIGKILL.
void RunPolicy::escalate(const std::vector<ChildState>& children, bool interrupted,
                         RunClock::time_point now, RunActions& actions) {
  bool workers_done = true;
  for (std::size_t i = 1; i < children.size(); ++i) workers_done = workers_done && children[i].done;
  if (interrupted && (!stop_workers_at_ || *stop_workers_at_ > now)) stop_workers_at_ = now;
  if (failed(children) && !stop_workers_at_) stop_workers_at_ = now + options_.grace;
  // Elastic: a worker the job went on without may still run (a hung one,
  // SIGSTOPped); once the coordinator ended, it gets the grace, then the stops.
  if (options_.elastic && children[kCoordinator].done && !workers_done && !stop_workers_at_)
    stop_workers_at_ = now + options_.grace;
  const auto linger = interrupted ? RunClock::duration::zero() : options_.linger;
  if (stop_workers_at_ && now >= *stop_workers_at_ && !workers_stopped_) {
    actions.stop_workers = true;
    workers_stopped_ = true;
    stop_all_at_ = now + kWorkersToAll + linger;
  }
  if (workers_done && !children[kCoordinator].done &&
      options_.linger > RunClock::duration::zero() && !linger_said_) {
    actions.say_linger = true;
    linger_said_ = true;
  }
  const bool coordinator_may_linger = linger > RunClock::duration::zero();
  if (workers_stopped_ && !kill_at_ &&
      ((workers_done && !coordinator_may_linger) || now >= *stop_all_at_)) {
    actions.stop_all = true;
    kill_at_ = now + kTermToKill;
  }
  if (kill_at_ && now >= *kill_at_) actions.kill_all = true;
}

RunOutcome run_outcome(const std::vector<ChildState>& children, bool elastic, int interrupted) {
  RunOutcome o;
  if (interrupted != 0) {
    o.end = RunOutcome::End::kInterrupted;
    o.signal = interrupted;
    return o;
  }
  const bool succeeded = children[kCoordinator].status == 0;
  for (int i = 0; i < static_cast<int>(children.size()); ++i) {
    const int status = children[static_cast<std::size_t>(i)].status;
    if (status == control::kExitRecordsLost)
      o.lost.push_back(i);
    else if (status != 0)
      (elastic && succeeded && i != kCoordinator ? o.gone : o.failed).push_back(i);
  }
  o.end = !o.failed.empty() ? RunOutcome::End::kFailed
          : !o.lost.empty() ? RunOutcome::End::kRecordsLost
                            : RunOutcome::End::kSucceeded;
  return o;
}

int RunOutcome::exit_code() const {
  switch (end) {
    case End::kSucceeded:
      return 0;
    case End::kRecordsLost:
      return control::kExitRecordsLost;
    case End::kFailed:
      return 1;
    case End::kInterrupted:
      return 128 + signal;
  }
  return 1;
}

}  // namespace mddp::cli

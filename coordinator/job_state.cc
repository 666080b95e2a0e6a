#include "coordinator/job_state.h"

namespace mddp::coordinator {

JobStatus JobState::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

void JobState::set_first_attempt(int attempt) {
  std::lock_guard lock(mu_);
  status_.attempt = attempt;
}

bool JobState::restart(int attempt) {
  std::lock_guard lock(mu_);
  if (status_.terminal()) return false;
  status_.state = State::kForming;
  status_.attempt = attempt;
  return true;
}

void JobState::set_running() {
  std::lock_guard lock(mu_);
  if (status_.state == State::kForming) status_.state = State::kRunning;
}

bool JobState::succeed() {
  {
    std::lock_guard lock(mu_);
    if (status_.state != State::kRunning) return false;
    status_.state = State::kSucceeded;
  }
  cv_.notify_all();
  return true;
}

bool JobState::fail(Verdict verdict) {
  {
    std::lock_guard lock(mu_);
    if (status_.terminal()) return false;
    status_.state = State::kFailed;
    status_.verdict = std::move(verdict);
  }
  cv_.notify_all();
  return true;
}

JobStatus JobState::wait_terminal(TimePoint deadline) const {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return status_.terminal(); });
  return status_;
}

}  // namespace mddp::coordinator

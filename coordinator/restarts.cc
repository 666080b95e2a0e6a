#include "coordinator/restarts.h"

#include <algorithm>

#include "core/common/check.h"

namespace mddp::coordinator {

// Note [What is restarted]
// Only what a restart can cure: a process that died, went silent (hung,
// stopped, cut off) or lost a data-plane link. A rank's own error is not
// restarted: training is deterministic (bitwise, from the same
// checkpoint), so a diverged loss or a bad file would come back at the same
// step, and Ctrl-C means stop. Nor is a model mismatch, a rendezvous that
// timed out (there is nobody to restart), a stalled coordinator or a
// shutdown. The budget, --max-restarts, counts restarts over the whole job.

Restarts::Restarts(int max_restarts, int first_attempt)
    : max_restarts_(max_restarts), first_attempt_(first_attempt) {}

void Restarts::take_over(std::vector<Restart> earlier, Restart takeover) {
  history_ = std::move(earlier);
  history_.push_back(std::move(takeover));
}

void Restarts::record(Restart r) {
  history_.push_back(std::move(r));
}

int Restarts::used() const {
  // A new coordinator taking over (attempt first_attempt_) is no restart of its own.
  // Nor is a shrink or a grow: the survivors went on, nobody started again.
  return static_cast<int>(std::count_if(history_.begin(), history_.end(), [&](const Restart& r) {
    return r.attempt > first_attempt_ && !r.shrink && !r.grow;
  }));
}

bool Restarts::cures(const Verdict& verdict) const {
  return control::restartable(verdict.cause) && left();
}

std::string Restarts::failure_note(const Verdict& verdict, int attempt) const {
  if (control::restartable(verdict.cause) && max_restarts_ > 0)
    return str(" (no restart left: all ", max_restarts_, " of --max-restarts used)");
  const int n = used();
  if (n > 0)
    return str(" (in attempt ", attempt, ", after ", n, " restart", n == 1 ? "" : "s", ")");
  return "";
}

}  // namespace mddp::coordinator

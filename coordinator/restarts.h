// The restart policy of a job and its record (Note [What is restarted] in
// restarts.cc): whether a verdict ends only its attempt, for the next one to
// form, or the whole job; the budget, --max-restarts, counted over the
// whole job; and the restarts made, with the ones a coordinator before this
// one recorded in the run's job.json. Not thread-safe: Job holds it under
// its lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/verdict.h"

namespace mddp::coordinator {

using control::Verdict;

// One restart: an attempt ended and the next one formed.
struct Restart {
  int attempt = 0;  // the attempt it started
  Verdict verdict;  // why the attempt before ended (cause kNone: a new coordinator took over)
  int64_t unix_ns = 0;
  bool shrink = false;  // --on-failure shrink: the survivors went on (no restart spent)
  bool grow = false;    // --on-failure heal: workers joined the survivors (no restart spent)
};

class Restarts {
 public:
  // `first_attempt`: this coordinator's first (after the attempts of a run it took over).
  Restarts(int max_restarts, int first_attempt);

  // The restarts the run's coordinators before this one made, then the
  // takeover itself (attempt first_attempt), which is no restart of this one's.
  void take_over(std::vector<Restart> earlier, Restart takeover);
  void record(Restart r);
  const std::vector<Restart>& history() const { return history_; }

  int used() const;  // the restarts this coordinator made
  bool left() const { return used() < max_restarts_; }
  // Whether `verdict` can be cured by a restart that the budget still allows.
  bool cures(const Verdict& verdict) const;
  // What the line of a verdict that fails the job in `attempt` adds: that
  // the budget is spent, or the attempt and restarts it came after ("" if neither).
  std::string failure_note(const Verdict& verdict, int attempt) const;

 private:
  int max_restarts_;
  int first_attempt_;
  std::vector<Restart> history_;
};

}  // namespace mddp::coordinator

// Lab 14's checker: the student's reading of a job whose loss turned NaN
// (my_work/poisoned_shard.toml) against the rank and step whose data
// `microddp lab run poisoned_shard` poisoned.
#include "core/common/check.h"

#include "labs/checks.h"
#include "labs/support/diagnosis.h"

namespace mddp::labs {
namespace {

Grading grade_poisoned_rank(const DiagnosisCase& c) {
  const auto rank = c.whole("rank");
  if (!rank) return not_answered("rank");
  if (*rank == c.fault.rank) return {};
  Grading g{str("rank ", *rank, "'s data was not poisoned"), {}};
  if (*rank == 0)
    g.details.push_back(
        "rank 0 prints the console's lines, but their loss is the mean over "
        "every rank: NaN as soon as any one rank's loss is");
  g.details.push_back(
      "look at each rank's own loss (the dashboard's rank table, /api/ranks, or "
      "the run's metrics.jsonl, where NaN is written as null): one rank turns "
      "NaN a step before the others");
  return g;
}

Grading grade_poisoned_steps(const DiagnosisCase& c) {
  const auto step = c.whole("step");
  const auto spread = c.whole("spread_step");
  if (!step) return not_answered("step");
  if (!spread) return not_answered("spread_step");
  const int64_t s = c.fault.step;
  if (*step != s) {
    Grading g{str("the poison did not strike at step ", *step), {}};
    if (*step == s + 1)
      g.details.push_back(
          "that is when every rank's loss is NaN: the step after the poisoned "
          "rank's own loss turned NaN");
    g.details.push_back("the poisoned rank's own loss is NaN first");
    return g;
  }
  if (*spread == s + 1) return {};
  Grading g{str("every rank's own loss is not NaN from step ", *spread), {}};
  if (*spread == s)
    g.details.push_back(
        "the console's loss (a mean over ranks) is NaN at once; each other rank's "
        "own loss turns NaN only after the all-reduce spread the NaN gradients "
        "into every replica's weights");
  return g;
}

}  // namespace

void check_poisoned_shard(const Implementations&, const CheckOptions& o, Report& report) {
  const auto c = open_case("poisoned_shard", o, report);
  if (!c) return;
  Grading g = grade_poisoned_rank(*c);
  if (g.wrong.empty()) g = grade_poisoned_steps(*c);
  const PlantedFault& f = c->fault;
  report_diagnosis(
      g,
      {str("rank ", f.rank, "'s targets for step ", f.step,
           " held a NaN (a damaged record in its shard): its own loss was NaN at step ", f.step,
           ", and so were its gradients."),
       str("The all-reduce averaged those NaN gradients into every rank's, so every replica's "
           "weights were NaN after step ",
           f.step, "'s optimizer step, and every rank's loss from step ", f.step + 1, "."),
       "The console's loss is a mean over ranks: it cannot say which rank went first; each "
       "rank's own loss can."},
      3, report);
}

}  // namespace mddp::labs

// Lab 13's checker: the student's reading of a job with a chronic straggler
// (my_work/straggler.toml) against the fault `microddp lab run straggler`
// planted, and `microddp analyze`'s reading of the run for the wait it cost.
#include "core/common/check.h"

#include <algorithm>
#include <cmath>

#include "labs/checks.h"
#include "labs/support/diagnosis.h"

namespace mddp::labs {
namespace {

// The rank whose training thread waited longest for communication: a
// waiter, the classic misreading of who is slow.
int most_exposed_rank(const perf::Analysis& an) {
  return an.phases[perf::kExposedComm].slowest_rank;
}

Grading grade_straggler_rank(const DiagnosisCase& c, const perf::Analysis& an) {
  const auto rank = c.whole("rank");
  if (!rank) return not_answered("rank");
  if (*rank == c.fault.rank) return {};
  Grading g{str("rank ", *rank, " is not the straggler"), {}};
  if (*rank == most_exposed_rank(an))
    g.details.push_back(str("rank ", *rank,
                            " spent the longest in communication: it waited for "
                            "the straggler. The slow rank itself waits least"));
  g.details.push_back(
      "analyze's stragglers table counts who reached the first all-reduce late, "
      "step after step; one step alone is noise");
  return g;
}

Grading grade_straggler_phase(const DiagnosisCase& c) {
  const auto phase = c.text("phase");
  if (!phase) return not_answered("phase");
  if (*phase == c.fault.phase) return {};
  Grading g{str("the straggler does not lose its time in ", *phase), {}};
  if (*phase == "sync" || *phase == "exposed comm")
    g.details.push_back("communication is where the others wait for it, not where it is slow");
  g.details.push_back(
      "the stragglers table says 'by phase': where the late rank was slower "
      "than the median rank");
  return g;
}

Grading grade_straggler_wait(const DiagnosisCase& c, const perf::Analysis& an) {
  const auto wait = c.number("wait_ms_per_step");
  if (!wait) return not_answered("wait_ms_per_step");
  const auto& ranks = an.stragglers.ranks;
  const auto it = std::find_if(ranks.begin(), ranks.end(),
                               [&](const auto& r) { return r.rank == c.fault.rank; });
  if (it == ranks.end() || an.steps_used == 0)
    return {"analyze found no late steps of the straggler in this run: make a new one", {}};
  const double want = it->late_ms_total / static_cast<double>(an.steps_used);
  if (std::abs(*wait - want) <= std::max(0.3, 0.15 * want)) return {};
  Grading g{str(*wait, " ms is not what the others wait per step"), {}};
  if (std::abs(*wait - it->late_ms_total) <= 0.15 * it->late_ms_total)
    g.details.push_back("that is the wait over the whole run; divide by the steps analysed");
  g.details.push_back(
      "analyze's verdict evidence says how long the others wait for it in the "
      "first all-reduce, per step on average");
  return g;
}

}  // namespace

void check_straggler(const Implementations&, const CheckOptions& o, Report& report) {
  const auto c = open_case("straggler", o, report);
  if (!c) return;
  const auto an = analyze_case(*c, report);
  if (!an) return;
  Grading g = grade_straggler_rank(*c, *an);
  if (g.wrong.empty()) g = grade_straggler_phase(*c);
  if (g.wrong.empty()) g = grade_straggler_wait(*c, *an);
  const PlantedFault& f = c->fault;
  report_diagnosis(
      g,
      {str("rank ", f.rank, " slept ", f.ms, " ms in ", f.phase, " of every step."),
       "Every step's first all-reduce needs every rank, so the others waited for it there: "
       "their exposed communication grew, its own stayed short.",
       "In one step that is lost in the noise of a shared machine; over many steps analyze's "
       "straggler count makes it plain."},
      3, report);
}

}  // namespace mddp::labs

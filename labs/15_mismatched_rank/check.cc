// Lab 15's checker: the student's reading of a job refused at start because
// one rank built another model (my_work/mismatched_rank.toml), against the
// rank and setting `microddp lab run mismatched_rank` planted.
#include "core/common/check.h"

#include "labs/checks.h"
#include "labs/support/diagnosis.h"

namespace mddp::labs {
namespace {

Grading grade_odd_rank(const DiagnosisCase& c) {
  const auto rank = c.whole("rank");
  if (!rank) return not_answered("rank");
  if (*rank == c.fault.rank) return {};
  Grading g{str("rank ", *rank, " built the same model as most ranks"), {}};
  if (*rank == verdict_rank(c.run))
    g.details.push_back(str("rank ", *rank,
                            " is the one the job's verdict says failed: it only "
                            "reported the difference first; every rank finds it, and the "
                            "message after 'failed:' names who built another model"));
  if (*rank == 0)
    g.details.push_back(
        "rank 0 is where the weights come from, not where the difference is: "
        "every rank's model is compared with every other's");
  g.details.push_back("the error says which rank(s) built a different model than the others");
  return g;
}

Grading grade_odd_setting(const DiagnosisCase& c) {
  const auto setting = c.text("setting");
  if (!setting) return not_answered("setting");
  if (*setting == c.fault.setting) return {};
  Grading g{str("the odd rank's ", *setting, " is the job's"), {}};
  if (*setting == "width")
    g.details.push_back(
        "the shapes differ because the odd rank has one layer more: where the "
        "others have their output layer [classes, width], it has another hidden "
        "[width, width]; compare with job.json's model");
  if (*setting == "depth")
    g.details.push_back(
        "the same parameter has another size on the odd rank: the layers are "
        "all there, each of another width; compare with job.json's model");
  return g;
}

}  // namespace

void check_mismatched_rank(const Implementations&, const CheckOptions& o, Report& report) {
  const auto c = open_case("mismatched_rank", o, report);
  if (!c) return;
  Grading g = grade_odd_rank(*c);
  if (g.wrong.empty()) g = grade_odd_setting(*c);
  const PlantedFault& f = c->fault;
  report_diagnosis(
      g,
      {str("rank ", f.rank, " built its MLP with another ", f.setting, " than the job's (",
           f.setting == "width" ? "3/4 of --width" : "one hidden layer more",
           "), as a worker started with a stale flag would."),
       "Before any step, every rank all-gathers the names and shapes of its parameters and "
       "compares them with every other rank's: averaging gradients of different models would "
       "silently train nonsense, so the job stops at once.",
       "The error names the rank(s) that differ from the others, which may be rank 0 itself, "
       "and the first parameter where they differ; job.json says which side is the job's."},
      2, report);
}

}  // namespace mddp::labs

// Lab 16's checker: the student's reading of a job that failed because one
// rank's shard ran out first (my_work/uneven_work.toml), against the rank
// and step `microddp lab run uneven_work` planted, and the collective the
// run's coordinator.log shows the ranks disagreeing in.
#include "core/common/check.h"

#include <fstream>
#include <regex>

#include "labs/checks.h"
#include "labs/support/diagnosis.h"

namespace mddp::labs {
namespace {

// The coordinator's verdict: the rank it names as failed (the one that
// noticed), the collective's sequence number, and the other rank of the
// message whose size did not match.
struct UnevenLog {
  int reporter = -1, other = -1;
  int64_t sequence = -1;
};

UnevenLog read_uneven_log(const std::filesystem::path& run) {
  std::ifstream in(run / "coordinator.log");
  const std::regex verdict(
      R"(job '.*' failed: rank ([0-9]+) .*#([0-9]+): .* with rank ([0-9]+): )");
  UnevenLog log;
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, verdict)) {
      log.reporter = std::stoi(m[1]);
      log.sequence = std::stoll(m[2]);
      log.other = std::stoi(m[3]);
      break;
    }
  return log;
}

Grading grade_short_rank(const DiagnosisCase& c, const UnevenLog& log) {
  const auto rank = c.whole("rank");
  if (!rank) return not_answered("rank");
  if (*rank == c.fault.rank) return {};
  Grading g{str("rank ", *rank, "'s shard did not run out first"), {}};
  if (*rank == log.reporter || *rank == log.other)
    g.details.push_back(
        "of the two ranks in the error, one sent or expected a 4-byte message: a "
        "scalar, not a gradient bucket. That rank had finished training and "
        "was reducing something else; the other was still in a step");
  g.details.push_back(
      "the error is from whichever rank noticed the sizes differ, which need not "
      "be the rank whose data ran out");
  return g;
}

Grading grade_short_steps(const DiagnosisCase& c, const UnevenLog& log) {
  const auto step = c.whole("last_step");
  const auto seq = c.whole("sequence");
  if (!step) return not_answered("last_step");
  if (!seq) return not_answered("sequence");
  if (*step != c.fault.step) {
    Grading g{str("the shard did not run out after step ", *step), {}};
    if (*step == c.fault.step + 1)
      g.details.push_back(
          "no rank finished that step: the others failed inside its first "
          "all-reduce");
    g.details.push_back("every rank's last finished step is in the rank table and metrics.jsonl");
    return g;
  }
  if (*seq == log.sequence) return {};
  return {str("the ranks did not part ways in collective #", *seq),
          {"the error's all_reduce #N is the collective the ranks were in"}};
}

}  // namespace

void check_uneven_work(const Implementations&, const CheckOptions& o, Report& report) {
  const auto c = open_case("uneven_work", o, report);
  if (!c) return;
  const UnevenLog log = read_uneven_log(c->run);
  if (log.sequence < 0) {
    report.fail(
        "the run's coordinator.log has no verdict: let `microddp lab run uneven_work` run "
        "until the job fails");
    return;
  }
  Grading g = grade_short_rank(*c, log);
  if (g.wrong.empty()) g = grade_short_steps(*c, log);
  const PlantedFault& f = c->fault;
  report_diagnosis(
      g,
      {str("rank ", f.rank, "'s shard ended after step ", f.step,
           "; the other ranks' went on. As its last step ended it reduced the loss of its last "
           "progress line over the ranks: an all-reduce of one number."),
       str("The others went on to step ", f.step + 1, "'s first all-reduce: the same collective #",
           log.sequence,
           " on every rank, with a gradient bucket on three ranks and a scalar on "
           "one. The transport saw the sizes differ and failed it at once, naming the pair."),
       "DDP needs every rank to run the same collectives in the same order: uneven shards "
       "break that, which is why samplers pad or drop to equal sizes and why PyTorch's Join "
       "context exists."},
      3, report);
}

}  // namespace mddp::labs

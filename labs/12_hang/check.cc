// Lab 12's checker: the student's reading of a hung job (my_work/hang.toml)
// against the fault `microddp lab run hang` planted, and the collective
// the coordinator's roll call saw the other ranks wait in.
#include "core/common/check.h"

#include <fstream>
#include <regex>
#include <set>

#include "labs/checks.h"
#include "labs/support/diagnosis.h"

namespace mddp::labs {
namespace {

// What the run's coordinator log shows: the roll call's collective and
// sequence number, the rank its verdict blamed (the first to time out), and
// every rank whose own wait timed out.
struct HangLog {
  std::string op;  // "all_reduce(ring)"
  int64_t sequence = -1;
  int blamed = -1;
  std::set<int> timed_out;
};

HangLog read_hang_log(const std::filesystem::path& run) {
  std::ifstream in(run / "coordinator.log");
  const std::regex roll(R"(no progress for .* waits? in ([a-z_]+(\([a-z]+\))?) #([0-9]+))");
  const std::regex waited(
      R"(error: rank ([0-9]+) .*left with a failure: rank [0-9]+: .* timed out)");
  HangLog log;
  log.blamed = verdict_rank(run);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (log.sequence < 0 && std::regex_search(line, m, roll)) {
      log.op = m[1];
      log.sequence = std::stoll(m[3]);
    }
    if (std::regex_search(line, m, waited)) log.timed_out.insert(std::stoi(m[1]));
  }
  return log;
}

Grading grade_hung_rank(const DiagnosisCase& c, const HangLog& log) {
  const auto rank = c.whole("rank");
  if (!rank) return not_answered("rank");
  if (*rank == c.fault.rank) return {};
  Grading g{str("rank ", *rank, " did not stop"), {}};
  if (*rank == log.blamed || log.timed_out.count(static_cast<int>(*rank)))
    g.details.push_back(str("rank ", *rank, " timed out",
                            *rank == log.blamed ? " first (the job's error names it)" : "",
                            ", waiting for a rank that never came. A timeout names a waiter, not "
                            "the rank that hung"));
  g.details.push_back(
      "the roll call ('no progress for ...') says where every rank is: the one "
      "not waiting in the collective is the one the others wait for");
  return g;
}

Grading grade_hung_place(const DiagnosisCase& c) {
  const auto step = c.whole("step");
  const auto phase = c.text("phase");
  if (!step) return not_answered("step");
  if (!phase) return not_answered("phase");
  if (*step != c.fault.step)
    return {str("the rank did not stop in step ", *step),
            {"the roll call's 'last seen in PHASE of step S' is the step it stopped in"}};
  if (*phase == c.fault.phase) return {};
  Grading g{str("the rank did not stop in ", *phase), {}};
  if (*phase == "sync")
    g.details.push_back("sync is where the other ranks wait; the stopped rank never got there");
  g.details.push_back("the roll call names the phase it was last seen in");
  return g;
}

Grading grade_awaited_collective(const DiagnosisCase& c, const HangLog& log) {
  const auto op = c.text("collective");
  const auto seq = c.whole("sequence");
  if (!op) return not_answered("collective");
  if (!seq) return not_answered("sequence");
  if (log.sequence < 0)
    return {
        "the run's coordinator.log has no roll call: let `microddp lab run hang` run until "
        "the job fails",
        {}};
  if (!log.op.starts_with(*op))
    return {str("the others do not wait in ", *op), {str("the roll call says ", log.op)}};
  if (*seq == log.sequence) return {};
  Grading g{str("the others do not wait in #", *seq), {}};
  if (*seq == log.sequence - 1)
    g.details.push_back(
        "that is the last collective every rank finished; the one they wait in "
        "is the next");
  g.details.push_back("the roll call gives the collective's sequence number after '#'");
  return g;
}

}  // namespace

void check_hang(const Implementations&, const CheckOptions& o, Report& report) {
  const auto c = open_case("hang", o, report);
  if (!c) return;
  const HangLog log = read_hang_log(c->run);
  Grading g = grade_hung_rank(*c, log);
  if (g.wrong.empty()) g = grade_hung_place(*c);
  if (g.wrong.empty()) g = grade_awaited_collective(*c, log);
  const PlantedFault& f = c->fault;
  report_diagnosis(
      g,
      {str("rank ", f.rank, " stopped for good when ", f.phase, " of step ", f.step,
           " began (its heartbeats went on: it was alive, just stuck)."),
       str("The other ranks went on to the step's first all-reduce, ", log.op, " #", log.sequence,
           ", and waited there for it."),
       str("After --comm-timeout-ms, rank ", log.blamed,
           " gave up first and the job's error names it; the roll call, printed while the job was "
           "stalled, named the rank that stopped.")},
      5, report);
}

}  // namespace mddp::labs

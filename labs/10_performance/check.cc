// Lab 10's checker: the student's answers (my_work/performance.toml) about
// a run they profiled, against `microddp analyze`'s analysis of that run
// (core/perf/analysis.h). Each wrong answer says where analyze shows it and,
// for the classic confusions (total for exposed communication, a percentage
// for a fraction, parameters for bytes, S/beta for one ring step), which
// one it is.
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/perf/analysis.h"
#include "core/perf/cost_model.h"
#include "labs/checks.h"
#include "labs/support/ranks.h"

namespace mddp::labs {
namespace {

constexpr double kAlpha = 50e-6, kBeta = 1e9;  // the question's link

struct Answers {
  const toml::table& t;
  // The answer to `key`, or nullopt when left as the template has it.
  std::optional<double> number(const char* key) const {
    const auto v = t[key].value<double>();
    if (!v || *v < 0) return std::nullopt;
    return v;
  }
  std::optional<std::string> text(const char* key) const {
    const auto v = t[key].value<std::string>();
    if (!v || v->empty()) return std::nullopt;
    return v;
  }
};

bool near(double got, double want, double rel, double abs = 0) {
  return std::abs(got - want) <= std::max(abs, rel * std::abs(want));
}

// Each question's grader: nullopt when its answer is right, else what is
// wrong (or missing) with it.
using Graded = std::optional<CaseResult>;

CaseResult unanswered(int q, const char* key) {
  return CaseResult{.message = str("question ", q, " (", key, ") is not answered yet")};
}

Graded grade_verdict(const Answers& a, const perf::Analysis& an) {
  const auto verdict = a.text("verdict");
  if (!verdict) return unanswered(1, "verdict");
  if (*verdict != an.verdict.kind)
    return CaseResult{.message =
                          str("question 1: analyze's verdict for this run is not '", *verdict,
                              "': read the 'verdict:' line and the evidence under it")};
  return std::nullopt;
}

Graded grade_straggler(const Answers& a, const perf::Analysis& an) {
  const auto& worst = an.stragglers.worst;
  const auto rank = a.number("straggler_rank");
  const auto phase = a.text("straggler_phase");
  if (worst) {
    if (!rank) return unanswered(2, "straggler_rank");
    if (!phase) return unanswered(2, "straggler_phase");
    if (static_cast<int>(*rank) != worst->rank || *phase != worst->phase)
      return CaseResult{.message = str("question 2: the rank the others waited for was not rank ",
                                       static_cast<int>(*rank), " in ", *phase,
                                       ": read the 'stragglers' section ('worst:')")};
  } else if (rank || phase) {
    return CaseResult{
        .message =
            "question 2: no rank was late in this run (analyze lists no straggler): answer -1 "
            "and \"\""};
  }
  return std::nullopt;
}

Graded grade_exposed_share(const Answers& a, const perf::Analysis& an) {
  const auto exposed = a.number("exposed_comm_share");
  if (!exposed) return unanswered(3, "exposed_comm_share");
  if (near(*exposed, an.exposed_comm_share, 0, 0.01)) return std::nullopt;
  CaseResult r{.message = str("question 3: ", *exposed,
                              " is not the exposed communication's share of the step")};
  if (near(*exposed, 100 * an.exposed_comm_share, 0, 1))
    r.details.push_back("a fraction is asked for: 42.5% is 0.425");
  else if (near(*exposed, an.total_comm_share, 0, 0.01))
    r.details.push_back(
        "that is the share of the total communication (the '*' row, on the progress thread); "
        "exposed is only what the training thread waited for after backward");
  r.details.push_back("read the 'exposed comm' row's share, or the 'communication:' line");
  return r;
}

Graded grade_overlap(const Answers& a, const perf::Analysis& an) {
  const auto overlap = a.number("overlap");
  if (!overlap) return unanswered(4, "overlap");
  if (near(*overlap, an.overlap, 0, 0.01)) return std::nullopt;
  CaseResult r{.message = str("question 4: ", *overlap, " is not the overlap")};
  if (near(*overlap, 100 * an.overlap, 0, 1))
    r.details.push_back("a fraction is asked for, not a percentage");
  r.details.push_back("the 'communication:' line gives it: 1 - exposed / total");
  return r;
}

Graded grade_comm_bytes(const Answers& a, const perf::Analysis& an) {
  const auto bytes = a.number("comm_bytes_per_step");
  if (!bytes) return unanswered(5, "comm_bytes_per_step");
  if (near(*bytes, an.comm_bytes_per_step, 0.01)) return std::nullopt;
  CaseResult r{.message = str("question 5: ", static_cast<int64_t>(*bytes),
                              " bytes is not what a rank all-reduces per step")};
  if (near(*bytes * 4, an.comm_bytes_per_step, 0.01))
    r.details.push_back("that is the number of parameters: each fp32 gradient is 4 bytes");
  r.details.push_back(
      "every gradient is all-reduced once per step: 4 bytes x parameters (the 'communication:' "
      "line shows it in MiB)");
  return r;
}

Graded grade_allreduce_count(const Answers& a, const perf::Analysis& an) {
  double per_step = 0;
  for (const auto& b : an.buckets) per_step += b.per_step;
  const auto count = a.number("allreduces_per_step");
  if (!count) return unanswered(6, "allreduces_per_step");
  if (near(*count, per_step, 0, 0.5)) return std::nullopt;
  return CaseResult{.message = str("question 6: not ", *count,
                                   " all-reduces per step: add the 'per step' column of the "
                                   "all-reduces table")};
}

Graded grade_ring_time(const Answers& a, const perf::Analysis& an) {
  double largest = 0;
  for (const auto& b : an.buckets) largest = std::max(largest, static_cast<double>(b.bytes));
  const auto ring = a.number("ring_ms_largest_bucket");
  if (!ring) return unanswered(7, "ring_ms_largest_bucket");
  const int n = an.config.world_size;
  const double want_ms = perf::allreduce_seconds("ring", largest, n, {kAlpha, kBeta}) * 1e3;
  if (near(*ring, want_ms, 0.02)) return std::nullopt;
  CaseResult r{.message =
                   str("question 7: ", *ring, " ms is not the ring's time for the largest bucket (",
                       static_cast<int64_t>(largest), " bytes on ", n, " ranks)")};
  if (near(*ring, 2.0 * (n - 1) * (kAlpha + largest / kBeta) * 1e3, 0.02))
    r.details.push_back("each ring step moves one block, S/n bytes, not the whole S");
  if (near(*ring * 1e3, want_ms, 0.02)) r.details.push_back("in milliseconds, not seconds");
  r.details.push_back("the ring takes 2(n-1) steps of alpha + S/(n beta) (docs/allreduce.md)");
  return r;
}

// The first wrong or missing answer, in question order, or ok when all are right.
CaseResult grade(const Answers& a, const perf::Analysis& an) {
  using Grader = Graded (*)(const Answers&, const perf::Analysis&);
  for (const Grader question : {grade_verdict, grade_straggler, grade_exposed_share, grade_overlap,
                                grade_comm_bytes, grade_allreduce_count, grade_ring_time})
    if (Graded wrong = question(a, an)) return std::move(*wrong);
  return CaseResult::ok();
}

}  // namespace

void check_performance(const Implementations&, const CheckOptions& o, Report& report) {
  const std::filesystem::path file = std::filesystem::path(o.work_dir) / "performance.toml";
  if (!std::filesystem::exists(file)) {
    report.fail(str("no answers at ", file.string(),
                    ": `microddp lab reset performance` makes the file to fill in"));
    return;
  }
  toml::table answers;
  try {
    answers = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    report.fail(str(file.string(), ": ", e.description(), " (line ", e.source().begin.line, ")"));
    return;
  }
  const auto run_entry = answers["run"].value<std::string>();
  if (!run_entry) {
    report.fail(str(file.string(), ": 'run' should name the run directory you profiled"));
    return;
  }
  std::filesystem::path run = *run_entry;
  if (run.is_relative()) run = std::filesystem::path(o.root_dir) / run;
  if (!std::filesystem::exists(run / "metrics.jsonl")) {
    report.fail(
        str("no run at ", run.string(), ": make it first (labs/10_performance/README.md, step 1):"),
        {str("build/cli/microddp run --nproc 2 --steps 60 --straggler 1:backward:3 --run-dir ",
             *run_entry)});
    return;
  }
  perf::Analysis an;
  try {
    an = perf::analyze(perf::load_run(run), perf::AnalyzeOptions{});
  } catch (const InputError& e) {
    report.fail(str("analyze cannot read ", run.string(), ": ", e.what()));
    return;
  }
  report.passed(str("read the run ", run.string(), " (", an.steps_used, " steps analysed)"), 1);
  const CaseResult r = grade(Answers{answers}, an);
  if (!r.message.empty()) {
    report.fail(r.message, r.details);
    return;
  }
  report.passed("every answer matches analyze's reading of the run", 7);
}

}  // namespace mddp::labs

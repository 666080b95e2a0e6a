// Lab 10's checker against a real 2-rank run (the CTest fixture
// labs.lab10_run): the untouched answers are "not answered", the answers
// read off analyze pass, and the classic misreadings are named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/perf/analysis.h"
#include "core/perf/cost_model.h"
#include "tests/labs/check_helpers.h"
#include "tests/support/files.h"

namespace mddp::labs::test {
namespace {

namespace fs = std::filesystem;

struct Answers {
  std::string verdict, straggler_phase;
  int straggler_rank = -1;
  double exposed = -1, overlap = -1, bytes = -1, allreduces = -1, ring_ms = -1;
  double largest_bucket = 0;  // not an answer: what the ring question is about
  int world = 0;
};

// What analyze says of the run: the reference answers.
Answers read_off_analyze() {
  const perf::Analysis an = perf::analyze(perf::load_run(MDDP_LAB10_RUN), perf::AnalyzeOptions{});
  Answers a;
  a.verdict = an.verdict.kind;
  if (an.stragglers.worst) {
    a.straggler_rank = an.stragglers.worst->rank;
    a.straggler_phase = an.stragglers.worst->phase;
  }
  a.exposed = an.exposed_comm_share;
  a.overlap = an.overlap;
  a.bytes = an.comm_bytes_per_step;
  a.allreduces = 0;
  for (const auto& b : an.buckets) {
    a.allreduces += b.per_step;
    a.largest_bucket = std::max(a.largest_bucket, static_cast<double>(b.bytes));
  }
  a.world = an.config.world_size;
  a.ring_ms = perf::allreduce_seconds("ring", a.largest_bucket, a.world, {50e-6, 1e9}) * 1e3;
  return a;
}

class PerformanceLab : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(fs::path(MDDP_LAB10_RUN) / "metrics.jsonl"))
        << "the fixture labs.lab10_run did not run";
    dir_ = fs::temp_directory_path() / ("mddp-lab10-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Report check_answers(const Answers& a) {
    std::ofstream(dir_ / "performance.toml")
        << "run = \"" << MDDP_LAB10_RUN << "\"\n"
        << "verdict = \"" << a.verdict << "\"\nstraggler_rank = " << a.straggler_rank
        << "\nstraggler_phase = \"" << a.straggler_phase << "\"\nexposed_comm_share = " << a.exposed
        << "\noverlap = " << a.overlap
        << "\ncomm_bytes_per_step = " << static_cast<int64_t>(a.bytes)
        << "\nallreduces_per_step = " << a.allreduces << "\nring_ms_largest_bucket = " << a.ring_ms
        << "\n";
    return check_in(dir_);
  }
  Report check_in(const fs::path& work) {
    CheckOptions o = options();
    o.work_dir = work.string();
    return run_check("performance", linked_implementations(), o);
  }
  fs::path dir_;
};

TEST_F(PerformanceLab, TheUntouchedAnswersAreNotAnswered) {
  std::string text =
      mddp::test::read_file(fs::path(source_root()) / "labs/10_performance/answers.toml");
  const std::string line = "run = \"runs/lab10\"";
  const auto at = text.find(line);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, line.size(), str("run = \"", MDDP_LAB10_RUN, "\""));
  std::ofstream(dir_ / "performance.toml") << text;
  const Report r = check_in(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.failure().find("question 1 (verdict) is not answered yet"), std::string::npos)
      << r.failure();
}

TEST_F(PerformanceLab, AnswersReadOffAnalyzePass) {
  const Report r = check_answers(read_off_analyze());
  EXPECT_TRUE(r.ok()) << r.failure();
}

TEST_F(PerformanceLab, AMissingRunSaysHowToMakeIt) {
  std::ofstream(dir_ / "performance.toml") << "run = \"" << (dir_ / "nothing").string() << "\"\n";
  const Report r = check_in(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.failure().find("make it first"), std::string::npos) << r.failure();
  EXPECT_NE(r.failure().find("microddp run --nproc 2"), std::string::npos) << r.failure();
}

struct Misreading {
  std::string name;
  std::function<void(Answers&)> change;
  std::string says;
};

TEST_F(PerformanceLab, TheClassicMisreadingsAreNamed) {
  const std::vector<Misreading> cases = {
      {"a percentage", [](Answers& a) { a.exposed *= 100; }, "a fraction is asked for"},
      {"parameters for bytes", [](Answers& a) { a.bytes /= 4; },
       "that is the number of parameters"},
      {"S for S/n",
       [](Answers& a) { a.ring_ms = 2 * (a.world - 1) * (50e-6 + a.largest_bucket / 1e9) * 1e3; },
       "each ring step moves one block"},
      {"seconds", [](Answers& a) { a.ring_ms /= 1e3; }, "in milliseconds, not seconds"},
      {"a wrong verdict",
       [](Answers& a) { a.verdict = a.verdict == "input-bound" ? "compute-bound" : "input-bound"; },
       "read the 'verdict:' line"},
  };
  for (const auto& c : cases) {
    Answers a = read_off_analyze();
    c.change(a);
    const Report r = check_answers(a);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_NE(r.failure().find(c.says), std::string::npos) << c.name << ":\n" << r.failure();
  }
}

}  // namespace
}  // namespace mddp::labs::test

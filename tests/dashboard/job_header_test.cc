// The job header the dashboard serves (job_json): its backend is the one the
// workers pick from the job's config (train::process_group_backend), not a
// guess from the device alone.
#include <gtest/gtest.h>

#include <string>

#include "control/job_config_json.h"
#include "control/metrics_record.h"
#include "coordinator/job.h"
#include "dashboard/server/job_json.h"
#include "dashboard/server/tracker.h"

namespace mddp::dashboard::test {
namespace {

// The backend the header of a job with this device and --backend says.
std::string header_backend(const std::string& device, const std::string& backend) {
  train::TrainConfig config;
  config.device = device;
  config.dist.backend = backend;
  coordinator::JobOptions options;
  options.config_json = control::dump_job_config(config);
  const coordinator::Job job(options);
  const Tracker tracker(job);
  return job_json(tracker.snapshot(coordinator::Clock::now()))["backend"].get<std::string>();
}

TEST(JobHeader, NamesTheBackendTheWorkersPick) {
  EXPECT_EQ(header_backend("cpu", "gloo"), "gloo");
  EXPECT_EQ(header_backend("cpu", "cpu"), "cpu");
  EXPECT_EQ(header_backend("cpu", "auto"), "cpu");
  EXPECT_EQ(header_backend("cuda", "auto"), "nccl");
  EXPECT_EQ(header_backend("cuda", "nccl"), "nccl");
}

// Rank 0's sample reaches the job's eval points whichever rank's report of
// the step came first; a model without samples has none in the JSON.
TEST(JobHeader, EvalPointsCarryRankZerosSample) {
  coordinator::JobOptions options;
  options.config_json = control::dump_job_config(train::TrainConfig{});
  const coordinator::Job job(options);
  Tracker tracker(job);
  const auto eval_record = [](int rank, int64_t step, const std::string& sample) {
    control::MetricsRecord r;
    r.metrics.rank = rank;
    r.metrics.step = step;
    r.metrics.eval = true;
    r.metrics.eval_loss = 2.5;
    r.metrics.eval_accuracy = 0.3;
    r.metrics.eval_sample = sample;
    return r;
  };
  const auto now = coordinator::Clock::now();
  tracker.observe({eval_record(1, 10, ""), eval_record(0, 10, "\nthe lamp")}, now);
  tracker.observe({eval_record(0, 20, "\nthe lens"), eval_record(1, 20, "")}, now);
  tracker.observe({eval_record(1, 30, "")}, now);
  // Rank 1's stream may run a whole evaluation ahead of rank 0's.
  tracker.observe({eval_record(1, 40, ""), eval_record(1, 50, "")}, now);
  tracker.observe({eval_record(0, 40, "\nthe lead"), eval_record(0, 50, "\nthe leaf")}, now);
  const nlohmann::json evals = job_json(tracker.snapshot(now))["eval"];
  ASSERT_EQ(evals.size(), 5u) << evals.dump();
  EXPECT_EQ(evals[0]["sample"], "\nthe lamp");
  EXPECT_EQ(evals[1]["sample"], "\nthe lens");
  EXPECT_FALSE(evals[2].contains("sample")) << evals.dump();
  EXPECT_EQ(evals[3]["sample"], "\nthe lead");
  EXPECT_EQ(evals[4]["sample"], "\nthe leaf");
  EXPECT_EQ(evals[0]["loss"], 2.5);
}

// A report of an earlier step that comes late takes its place in step order.
TEST(JobHeader, ALateEvalReportTakesItsPlaceInStepOrder) {
  coordinator::JobOptions options;
  options.config_json = control::dump_job_config(train::TrainConfig{});
  const coordinator::Job job(options);
  Tracker tracker(job);
  const auto now = coordinator::Clock::now();
  for (int64_t step : {20, 10, 30, 10}) {
    control::MetricsRecord r;
    r.metrics.step = step;
    r.metrics.eval = true;
    tracker.observe({r}, now);
  }
  const nlohmann::json evals = job_json(tracker.snapshot(now))["eval"];
  ASSERT_EQ(evals.size(), 3u) << evals.dump();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(evals[i]["step"], 10 * (i + 1)) << evals.dump();
}

}  // namespace
}  // namespace mddp::dashboard::test

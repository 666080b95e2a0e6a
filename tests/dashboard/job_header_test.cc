// The job header the dashboard serves (job_json): its backend is the one the
// workers pick from the job's config (train::process_group_backend), not a
// guess from the device alone.
#include <gtest/gtest.h>

#include <string>

#include "control/job_config_json.h"
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

}  // namespace
}  // namespace mddp::dashboard::test

// /api/collectives (the Collectives view) on a real server: traced steps
// only, the latest by default, one bucket's steps on the common clock.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "client.h"
#include "control/job_config_json.h"
#include "core/perf/step_metrics.h"
#include "dashboard/server/routes.h"
#include "fixture.h"

namespace mddp::dashboard::test {
namespace {

using nlohmann::json;

// Steps [first, first + count) of a 2-rank job whose one bucket is a ring
// all-reduce (2 steps; 1 MiB, which --algo auto sends by the ring); only
// traced steps carry the steps, as a worker sends them.
void feed_ring(coordinator::Job& job,
               const std::array<std::string, DashboardTest::kWorld>& sessions, int64_t first,
               int64_t count) {
  for (int r = 0; r < DashboardTest::kWorld; ++r) {
    std::vector<control::MetricsRecord> batch;
    for (int64_t s = first; s < first + count; ++s) {
      control::MetricsRecord rec;
      perf::StepMetrics& m = rec.metrics;
      m.rank = r;
      m.step = s;
      m.start_ns = s * 10'000'000;
      m.step_ms = 8;
      comm::CommSpan b{.index = 0,
                       .bytes = 1 << 20,
                       .start_ns = m.start_ns + 1'000'000,
                       .end_ns = m.start_ns + 1'200'000};
      if (perf::traced_step(s, DashboardTest::kWorld)) {
        for (int k = 0; k < 2; ++k)
          b.steps.push_back(
              {.phase = k == 0 ? comm::StepPhase::kReduceScatter : comm::StepPhase::kAllGather,
               .send_peer = 1 - r,
               .recv_peer = 1 - r,
               .send_block = k == 0 ? 1 - r : r,
               .recv_block = k == 0 ? r : 1 - r,
               .send_bytes = 1 << 19,
               .recv_bytes = 1 << 19,
               .start_ns = b.start_ns + k * 100'000,
               .end_ns = b.start_ns + (k + 1) * 100'000});
      }
      m.buckets = {b};
      batch.push_back(rec);
    }
    job.metrics(sessions[r], 0, std::move(batch));
  }
}

TEST_F(DashboardTest, CollectivesOfTheLatestTracedStep) {
  EXPECT_EQ(request(port(), "/api/collectives").result_int(), 404);  // no traced step yet
  feed_ring(job_, sessions_, 1, 25);
  const json j = json::parse(request(port(), "/api/collectives").body());
  EXPECT_EQ(j["step"], 20);
  EXPECT_EQ(j["traced_steps"], json::array({10, 20}));
  EXPECT_EQ(j["world_size"], 2);
  ASSERT_EQ(j["buckets"].size(), 1u);
  EXPECT_EQ(j["buckets"][0]["algorithm"], "ring");
  const json& c = j["collective"];
  ASSERT_EQ(c["steps"].size(), 2u);
  EXPECT_EQ(c["steps"][0]["phase"], "reduce-scatter");
  EXPECT_EQ(c["steps"][1]["phase"], "all-gather");
  EXPECT_EQ(c["steps"][0]["transfers"][1]["rank"], 1);
  EXPECT_EQ(c["steps"][0]["transfers"][1]["to"], 0);
  EXPECT_EQ(c["steps"][0]["transfers"][1]["send_block"], 0);
  EXPECT_DOUBLE_EQ(c["end_ms"].get<double>() - c["start_ms"].get<double>(), 0.2);
}

TEST_F(DashboardTest, CollectivesOfAChosenStepAndBucket) {
  feed_ring(job_, sessions_, 1, 25);
  EXPECT_EQ(json::parse(request(port(), "/api/collectives?step=10").body())["step"], 10);
  const json untraced = json::parse(request(port(), "/api/collectives?step=11").body());
  EXPECT_TRUE(untraced["buckets"].empty());
  EXPECT_TRUE(untraced["collective"].is_null());
  EXPECT_TRUE(json::parse(request(port(), "/api/collectives?step=10&bucket=7").body())["collective"]
                  .is_null());
  EXPECT_EQ(request(port(), "/api/collectives?step=99").result_int(), 404);
  EXPECT_EQ(request(port(), "/api/collectives?step=x").result_int(), 400);
  EXPECT_EQ(request(port(), "/api/collectives?bucket=-2").result_int(), 400);
}

// Past kStepTraceMaxRanks no step is ever traced (a step's transfers grow
// with the square of the ranks): the 404 says that, not "yet".
TEST(CollectivesRoute, ALargeJobTracesNoStepAndTheReplySaysWhy) {
  for (const int world : {perf::kStepTraceMaxRanks, perf::kStepTraceMaxRanks + 1}) {
    coordinator::JobOptions options;
    options.world_size = world;
    options.config_json = control::dump_job_config(train::TrainConfig{});
    const coordinator::Job job(options);
    const Tracker tracker(job);
    const StaticFiles files{std::filesystem::path()};
    const Reply r = route("/api/collectives", {job, tracker, files});
    EXPECT_EQ(r.status, 404);
    const std::string why = json::parse(r.body)["error"];
    if (world > perf::kStepTraceMaxRanks)
      EXPECT_EQ(
          why.rfind("a job of " + std::to_string(world) + " ranks traces no all-reduce steps", 0),
          0u)
          << why;
    else
      EXPECT_NE(why.find("has been reported by every rank yet"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace mddp::dashboard::test

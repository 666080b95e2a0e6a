// <run dir>/job.json as a pure function of what the Job gathers
// (coordinator/job_file.h), and the restart policy's budget
// (coordinator/restarts.h), without a Job.
#include "coordinator/job_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "coordinator/restarts.h"
#include "support/files.h"

namespace mddp::coordinator {
namespace {

JobFile two_ranks() {
  JobFile f;
  f.job_id = "j";
  f.world_size = 2;
  f.max_world_size = 3;
  f.attempt = 1;
  f.max_restarts = 2;
  f.attempts = {{0, 3}, {1, 2}};
  f.restarts = {Restart{1,
                        Verdict{.cause = control::Cause::kProcessDied,
                                .rank = 2,
                                .host = "c",
                                .pid = 77,
                                .message = "rank 2 died"},
                        123}};
  f.resumes = {MetricsLog::Resume{.attempt = 1, .from_step = 50, .steps_lost = 7}};
  f.started_unix_ns = 99;
  f.config_json = R"({"device": "cpu", "batch": 64})";
  Member a;
  a.rank = 0;
  a.host = "a";
  a.pid = 10;
  a.device = "cuda:0";
  a.threads = 2;
  a.cpus = 8;
  Member b;
  b.rank = 1;
  b.host = "b";
  b.pid = 11;
  f.members = {a, b};
  return f;
}

TEST(JobFile, SaysTheJobItsAttemptsRestartsAndMembers) {
  const nlohmann::json j = job_file_json(two_ranks());
  EXPECT_EQ(j["job_id"], "j");
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["max_world_size"], 3);
  EXPECT_EQ(j["min_world_size"], 3) << "no --min-nproc: the most";
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(j["started_unix_ns"], 99);
  EXPECT_EQ(j["config"]["batch"], 64);
  ASSERT_EQ(j["attempts"].size(), 2u);
  EXPECT_EQ(j["attempts"][1]["world_size"], 2);
  ASSERT_EQ(j["restarts"].size(), 1u);
  EXPECT_EQ(j["restarts"][0]["cause"], "process died");
  EXPECT_EQ(j["restarts"][0]["rank"], 2);
  EXPECT_EQ(j["restarts"][0]["unix_ns"], 123);
  EXPECT_EQ(j["restarts"][0]["resumed_from_step"], 50);
  EXPECT_EQ(j["restarts"][0]["steps_lost"], 7);
  ASSERT_EQ(j["members"].size(), 2u);
  EXPECT_EQ(j["members"][0]["device"], "cuda:0");
  EXPECT_EQ(j["members"][0]["threads"], 2);
  EXPECT_EQ(j["members"][1]["device"], "cpu") << "a rank that named none runs on the job's";
  EXPECT_TRUE(j["members"][1]["threads"].is_null()) << "not reported yet";
  EXPECT_TRUE(j["members"][1]["cpus"].is_null());
}

TEST(JobFile, AnElasticMinimumAFormingAttemptAndATakeover) {
  JobFile f = two_ranks();
  f.min_nproc = 2;
  f.attempts.push_back({2, 0});
  f.restarts.push_back(Restart{2, Verdict{.message = "a new coordinator took over"}, 5});
  f.config_json = "not json";
  const nlohmann::json j = job_file_json(f);
  EXPECT_EQ(j["min_world_size"], 2);
  EXPECT_TRUE(j["attempts"][2]["world_size"].is_null()) << "still forming";
  EXPECT_EQ(j["restarts"][1]["cause"], "coordinator restarted");
  EXPECT_FALSE(j["restarts"][1].contains("resumed_from_step"));
  EXPECT_TRUE(j["config"].is_object() && j["config"].empty());
  EXPECT_EQ(j["members"][1]["device"], "") << "no job device known";
}

TEST(JobFile, IsWrittenAndReadBackByTheNextCoordinator) {
  const auto dir = test::fresh_dir("job-file");
  EXPECT_EQ(write_job_file(dir, two_ranks()), "");
  const std::vector<Restart> earlier = earlier_restarts(dir);
  ASSERT_EQ(earlier.size(), 1u);
  EXPECT_EQ(earlier[0].attempt, 1);
  EXPECT_EQ(earlier[0].unix_ns, 123);
  EXPECT_EQ(earlier[0].verdict.rank, 2);
  EXPECT_EQ(earlier[0].verdict.host, "c");
  EXPECT_EQ(earlier[0].verdict.message, "rank 2 died");
  EXPECT_TRUE(earlier_restarts(dir / "none").empty());
  EXPECT_NE(write_job_file(dir / "none", two_ranks()), "") << "no such directory";
  std::filesystem::remove_all(dir);
}

TEST(Restarts, CountTheBudgetOverTheWholeJobButNotATakeover) {
  const Verdict died{.cause = control::Cause::kProcessDied, .message = "died"};
  const Verdict own{.cause = control::Cause::kRankError, .message = "bad loss"};
  Restarts r(2, 3);  // this coordinator took over at attempt 3
  r.take_over({Restart{1, died, 0}}, Restart{3, Verdict{}, 0});
  EXPECT_EQ(r.used(), 0);
  EXPECT_TRUE(r.cures(died));
  EXPECT_FALSE(r.cures(own)) << "a rank's own error comes back at the same step";
  EXPECT_EQ(r.failure_note(own, 3), "");
  r.record(Restart{4, died, 0});
  EXPECT_EQ(r.failure_note(own, 4), " (in attempt 4, after 1 restart)");
  r.record(Restart{5, died, 0});
  EXPECT_FALSE(r.left());
  EXPECT_FALSE(r.cures(died));
  EXPECT_EQ(r.failure_note(died, 5), " (no restart left: all 2 of --max-restarts used)");
  EXPECT_EQ(r.history().size(), 4u);
}

}  // namespace
}  // namespace mddp::coordinator

// MetricsLog: durable JSON lines, append-only, bounded tail. And the job
// config JSON round trip.
#include "coordinator/metrics_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "control/job_config_json.h"
#include "core/common/check.h"
#include "support/files.h"

namespace mddp::coordinator {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

MetricsRecord record(int rank, int64_t step) {
  MetricsRecord r;
  r.metrics.rank = rank;
  r.metrics.step = step;
  r.metrics.loss = 2.5;
  r.metrics.step_ms = 10;
  r.metrics.exposed_comm_ms = 1;
  r.metrics.total_comm_ms = 4;
  r.metrics.buckets.push_back(comm::CommSpan{0, 1024, 1, 2, 3, 4});
  r.time_unix_ns = 1700000000000000000 + step;
  return r;
}

TEST(MetricsLog, WritesOneJsonLinePerRecordFlushedPerBatch) {
  const fs::path dir = mddp::test::fresh_path("log") / "run";  // created on demand
  {
    MetricsLog log(dir);
    EXPECT_EQ(log.append({record(0, 1), record(1, 1)}), "");
    // Flushed: readable while the log is still open.
    auto lines = lines_of(dir / "metrics.jsonl");
    ASSERT_EQ(lines.size(), 2u);
    auto j = nlohmann::json::parse(lines[1]);
    EXPECT_EQ(j["rank"], 1);
    EXPECT_EQ(j["step"], 1);
    EXPECT_DOUBLE_EQ(j["overlap"].get<double>(), 0.75);
    EXPECT_EQ(j["buckets"][0]["bytes"], 1024);
    EXPECT_EQ(j["time_unix_ns"], 1700000000000000001);
    EXPECT_EQ(j["seq"], 2);
    log.sync();
  }
  {
    MetricsLog again(dir);  // append-only: continues the file
    again.append({record(0, 2)});
    EXPECT_EQ(again.count(), 1u);
  }
  EXPECT_EQ(lines_of(dir / "metrics.jsonl").size(), 3u);
  fs::remove_all(dir.parent_path());
}

TEST(MetricsLog, KeepsABoundedTailInOrder) {
  MetricsLog log("", 5);  // memory only
  EXPECT_EQ(log.path(), fs::path());
  for (int s = 1; s <= 8; ++s) log.append({record(0, s)});
  EXPECT_EQ(log.count(), 8u);
  auto all = log.since(0, 100);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all.front().seq, 4u);
  EXPECT_EQ(all.back().metrics.step, 8);
  auto newer = log.since(6, 100);
  ASSERT_EQ(newer.size(), 2u);
  EXPECT_EQ(newer[0].seq, 7u);
  EXPECT_EQ(log.since(6, 1).size(), 1u);
  EXPECT_TRUE(log.since(8, 10).empty());
}

TEST(MetricsLog, TakesStepsOutOfTheTail) {
  MetricsLog log("", 6);
  for (int s = 1; s <= 4; ++s) log.append({record(0, s), record(1, s)});
  MetricsRecord eval = record(0, 4);
  eval.metrics.eval = true;
  log.append({eval});  // the tail: seq 4..9, (rank 1, step 2) .. (1, 4), then the evaluation
  using SR = MetricsLog::StepRank;
  EXPECT_EQ(log.step_ranks(), (std::vector<SR>{{2, 1}, {3, 0}, {3, 1}, {4, 0}, {4, 1}}));
  const auto steps = log.steps(3, 4);  // both ends included, no evaluation
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps.front().seq, 5u);
  EXPECT_EQ(steps.back().seq, 8u);
  ASSERT_EQ(log.steps(2, 2).size(), 1u);  // rank 0's step 2 has left the tail
  EXPECT_EQ(log.steps(2, 2)[0].metrics.rank, 1);
  EXPECT_TRUE(log.steps(1, 1).empty());
  EXPECT_TRUE(log.steps(5, 100).empty());
  EXPECT_TRUE(MetricsLog("").step_ranks().empty());
}

TEST(MetricsLog, UnwritableRunDirIsAClearError) {
  const fs::path file = mddp::test::fresh_path("file");
  std::ofstream(file) << "x";
  try {
    MetricsLog log(file / "sub");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--run-dir"), std::string::npos) << e.what();
  }
  fs::remove(file);
}

TEST(JobConfigJson, RoundTripsEveryField) {
  train::TrainConfig c;
  c.model.kind = "cnn";
  c.model.channels = {8, 16};
  c.model.width = 77;
  c.loss = "mse";
  c.data.spec = "synthetic-regression";
  c.data.noise = 0.25f;
  c.batch = 96;
  c.steps = 123;
  c.optim.name = "sgd";
  c.optim.lr = 0.037f;
  c.optim.momentum = 0.9f;
  c.accumulate = 3;
  c.seed = 18446744073709551615ull;
  c.device = "cuda:1";
  c.run_dir = "/tmp/r";
  c.threads = 4;
  c.eval = false;
  c.dist.ddp = "hooked";
  c.dist.bucket_mb = 2.5;
  c.dist.compress = "bf16";
  c.dist.transport = "shm";
  c.dist.timeout_ms = 1234;
  c.dist.straggler = "1:forward:5";
  const train::TrainConfig d = parse_job_config(dump_job_config(c));
  EXPECT_EQ(job_config_to_json(d), job_config_to_json(c));
  EXPECT_EQ(d.model.channels, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(d.optim.lr, 0.037f) << "floats survive exactly";
  EXPECT_EQ(d.seed, c.seed);
  EXPECT_FALSE(d.eval);
  EXPECT_EQ(d.dist.timeout_ms, 1234);
  EXPECT_EQ(d.dist.straggler, "1:forward:5");
}

TEST(JobConfigJson, MissingKeysKeepDefaultsUnknownOrWrongTypesAreErrors) {
  const train::TrainConfig d = parse_job_config(R"({"batch": 8, "dist": {"ddp": "naive"}})");
  EXPECT_EQ(d.batch, 8);
  EXPECT_EQ(d.dist.ddp, "naive");
  EXPECT_EQ(d.dist.bucket_mb, train::TrainConfig{}.dist.bucket_mb);
  auto error_of = [](const std::string& text) {
    try {
      parse_job_config(text);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"({"model": {"widht": 3}})").find("unknown key 'model.widht'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"batch": "64"})").find("'batch' must be an integer, got \"64\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"batch": 6.5})").find("'batch' must be an integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"optim": []})").find("'optim' must be an object"), std::string::npos);
  EXPECT_NE(error_of(R"({"eval": 1})").find("'eval' must be true or false"), std::string::npos);
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
}

// Note [Exactly once by (attempt, rank, step)]: a record delivered twice
// is kept once; a restart that resumes from step S supersedes the earlier
// attempt's records past S, in the tail and for every reader of the file.
// The lines are made before the lock, the duplicates dropped under it: a
// duplicate inside a batch takes its own line out, not a neighbour's.
TEST(MetricsLog, ADuplicateInsideABatchLeavesTheFileAndItsLine) {
  const fs::path dir = mddp::test::fresh_path("dup");
  {
    MetricsLog log(dir);
    EXPECT_EQ(log.append({record(0, 1), record(0, 1), record(1, 1), record(0, 2)}), "");
    EXPECT_EQ(log.duplicates(), 1);
  }
  const auto lines = lines_of(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  const std::vector<std::pair<int, int64_t>> want{{0, 1}, {1, 1}, {0, 2}};
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j["rank"], want[i].first) << lines[i];
    EXPECT_EQ(j["step"], want[i].second) << lines[i];
    EXPECT_EQ(j["seq"], i + 1) << lines[i];
  }
  fs::remove_all(dir);
}

TEST(MetricsLog, KeepsOneRecordPerAttemptRankAndStepAndSupersedesWhatARestartRedoes) {
  const fs::path dir = mddp::test::fresh_path("attempts");
  const auto rec = [](int attempt, int rank, int64_t step) {
    MetricsRecord r = record(rank, step);
    r.attempt = attempt;
    return r;
  };
  {
    MetricsLog log(dir);
    std::vector<MetricsRecord> first;
    for (int64_t step = 1; step <= 10; ++step)
      for (int rank = 0; rank < 2; ++rank) first.push_back(rec(0, rank, step));
    EXPECT_EQ(log.append(first), "");
    EXPECT_EQ(log.append({rec(0, 0, 10)}), "");  // delivered again
    EXPECT_EQ(log.duplicates(), 1);
    EXPECT_EQ(log.append({rec(1, 0, 6), rec(1, 1, 6), rec(1, 0, 7)}), "");  // resumed from step 5
    ASSERT_EQ(log.resumes().size(), 1u);
    EXPECT_EQ(log.resumes()[0].attempt, 1);
    EXPECT_EQ(log.resumes()[0].from_step, 5);
    EXPECT_EQ(log.resumes()[0].steps_lost, 5);
    EXPECT_EQ(log.resumes()[0].superseded, 10);
    std::map<std::pair<int, int64_t>, int> seen;
    for (const auto& r : log.since(0, 1000)) ++seen[{r.metrics.rank, r.metrics.step}];
    for (const auto& [key, n] : seen)
      EXPECT_EQ(n, 1) << "rank " << key.first << " step " << key.second;
    EXPECT_EQ(seen.size(), 13u);  // steps 1..5 of both ranks, 6 of both, 7 of rank 0
    EXPECT_EQ(log.last_attempt(), 1);
  }
  // A new coordinator of the same run goes on counting attempts after the file's.
  MetricsLog again(dir);
  EXPECT_EQ(again.last_attempt(), 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mddp::coordinator

// `microddp run` as a user runs it: it prints the dashboard's URL, and with
// --http-linger the dashboard outlives the job, showing its final state.
// `microddp coordinator --http-public-url`: the URL printed is the one given.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "client.h"
#include "tests/support/microddp.h"

namespace mddp::dashboard::test {
namespace {

// Runs `cmd` (2>&1 appended); its output and exit status.
std::pair<std::string, int> run_command(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {"popen failed", -1};
  std::string out;
  char buf[1024];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  return {out, ::pclose(p)};
}

// `microddp run ... --http-linger S` to its end: its output and exit status,
// its dashboard's port, and /api/job as the lingering dashboard served it
// when run said the workers were done (null if it never said so).
struct LingeredRun {
  std::string out;
  int status = -1;
  int port = -1;
  nlohmann::json job;
};
LingeredRun run_to_linger(const std::string& cmd) {
  LingeredRun r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  const std::regex url_line(R"(dashboard at http://127\.0\.0\.1:(\d+)/)");
  char buf[1024];
  while (std::fgets(buf, sizeof buf, p)) {
    r.out += buf;
    std::smatch m;
    const std::string line = buf;
    if (r.port < 0 && std::regex_search(line, m, url_line)) r.port = std::stoi(m[1]);
    if (r.port > 0 && r.job.is_null() && line.find("the dashboard stays up") != std::string::npos)
      r.job = nlohmann::json::parse(request(r.port, "/api/job").body());
  }
  r.status = ::pclose(p);
  return r;
}

TEST(DashboardCli, RunPrintsTheUrlAndLingersWithTheFinalState) {
  const LingeredRun r = run_to_linger(mddp::test::microddp_binary() +
                                      " run --nproc 2 --dataset synthetic --width 32 --batch 32"
                                      " --steps 20 --http-linger 5");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_GT(r.port, 0) << "no dashboard URL printed:\n" << r.out;
  ASSERT_FALSE(r.job.is_null()) << "no linger line:\n" << r.out;
  EXPECT_EQ(r.job["state"], "succeeded") << r.job.dump();
  EXPECT_GT(r.job["step"].get<int>(), 0);
}

// A GPT on text, two ranks, two epochs: each evaluation's point in
// /api/job carries rank 0's 120 characters, all of the corpus's vocabulary,
// and metrics.jsonl has them on rank 0's eval records only.
TEST(DashboardCli, AGptOnTextShowsASampleAtEachEvaluation) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mddp-gpt-sample-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::string corpus = std::string(MDDP_TEST_DATA_DIR) + "/tiny_corpus.txt";
  const LingeredRun r =
      run_to_linger(mddp::test::microddp_binary() +
                    " run --nproc 2 --model gpt --layers 1 --heads 2 --embd 32 --block 16"
                    " --batch 128 --epochs 2 --lr 1e-2 --dataset text:" +
                    corpus + " --run-dir " + dir.string() + " --http-linger 5");
  EXPECT_EQ(r.status, 0) << r.out;
  const nlohmann::json evals = r.job.is_null() ? nlohmann::json() : r.job["eval"];
  ASSERT_EQ(evals.size(), 2u) << evals.dump() << r.out;
  std::stringstream text;
  text << std::ifstream(corpus).rdbuf();
  for (const auto& e : evals) {
    const std::string sample = e.value("sample", "");
    // 120 characters: the corpus's are one to three bytes long.
    EXPECT_GE(sample.size(), 120u) << e.dump();
    EXPECT_LE(sample.size(), 360u) << e.dump();
    for (char c : sample) EXPECT_NE(text.str().find(c), std::string::npos) << e.dump();
  }
  EXPECT_NE(evals[0]["sample"], evals[1]["sample"]) << "the model learned nothing between them";
  int with_sample = 0, without = 0;
  std::ifstream log(dir / "metrics.jsonl");
  for (std::string line; std::getline(log, line);) {
    const auto r = nlohmann::json::parse(line);
    if (r.value("kind", "") != "eval") continue;
    if (!r.contains("eval_sample")) {
      ++without;
      continue;
    }
    ++with_sample;
    EXPECT_EQ(r["rank"], 0) << line;
  }
  EXPECT_EQ(with_sample, 2);
  EXPECT_EQ(without, 2);
  std::filesystem::remove_all(dir);
}

TEST(DashboardCli, NoDashboardWithPortMinusOne) {
  const auto [out, status] = run_command(mddp::test::microddp_binary() +
                                         " run --nproc 1 --dataset synthetic --width 32 --batch 32"
                                         " --steps 2 --http-port -1");
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("dashboard"), std::string::npos) << out;
}

// A container's dashboard listens on 0.0.0.0:8080 inside, and is reached at
// a published port outside: the coordinator prints, and writes to
// --http-url-file, the URL it is given. (No worker joins: the rendezvous
// times out after 1 s and the coordinator exits 1.)
TEST(DashboardCli, CoordinatorPrintsThePublicUrl) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mddp-public-url-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto url_file = (dir / "url").string();
  const auto [out, status] =
      run_command(mddp::test::microddp_binary() +
                  " coordinator --world-size 1 --port 0 --rendezvous-timeout-s 1 --http-port 0"
                  " --http-public-url http://127.0.0.1:18080/ --http-url-file " +
                  url_file);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("dashboard: http://127.0.0.1:18080/\n"), std::string::npos) << out;
  std::stringstream written;
  written << std::ifstream(url_file).rdbuf();
  EXPECT_EQ(written.str(), "http://127.0.0.1:18080/\n");
  std::filesystem::remove_all(dir);
}

TEST(DashboardCli, CoordinatorRejectsABadPublicUrl) {
  const std::string coordinator =
      mddp::test::microddp_binary() + " coordinator --world-size 1 --port 0";
  auto [out, status] = run_command(coordinator + " --http-public-url 127.0.0.1:8080");
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("microddp: error: --http-public-url must be an http:// or https:// URL, got "
                     "'127.0.0.1:8080'"),
            std::string::npos)
      << out;
  std::tie(out, status) =
      run_command(coordinator + " --http-port -1 --http-public-url http://h:1/");
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("microddp: error: --http-public-url names the dashboard, but --http-port -1"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace mddp::dashboard::test

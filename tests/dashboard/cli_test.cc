// `microddp run` as a user runs it: it prints the dashboard's URL, and with
// --http-linger the dashboard outlives the job, showing its final state.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>

#include "client.h"

#ifndef MDDP_MICRODDP_BIN
#error "MDDP_MICRODDP_BIN must name the microddp binary"
#endif

namespace mddp::dashboard::test {
namespace {

TEST(DashboardCli, RunPrintsTheUrlAndLingersWithTheFinalState) {
  const std::string cmd = std::string(MDDP_MICRODDP_BIN) +
                          " run --nproc 2 --dataset synthetic --width 32 --batch 32 --steps 20"
                          " --http-linger 5 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  const std::regex url_line(R"(dashboard at http://127\.0\.0\.1:(\d+)/)");
  int port = -1;
  bool checked = false;
  std::string out;
  char buf[1024];
  while (std::fgets(buf, sizeof buf, p)) {
    out += buf;
    std::smatch m;
    const std::string line = buf;
    if (port < 0 && std::regex_search(line, m, url_line)) port = std::stoi(m[1]);
    if (!checked && line.find("the dashboard stays up") != std::string::npos) {
      ASSERT_GT(port, 0) << out;
      const auto job = nlohmann::json::parse(request(port, "/api/job").body());
      EXPECT_EQ(job["state"], "succeeded") << job.dump();
      EXPECT_GT(job["step"].get<int>(), 0);
      checked = true;
    }
  }
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_GT(port, 0) << "no dashboard URL printed:\n" << out;
  EXPECT_TRUE(checked) << "no linger line:\n" << out;
}

TEST(DashboardCli, NoDashboardWithPortMinusOne) {
  const std::string cmd = std::string(MDDP_MICRODDP_BIN) +
                          " run --nproc 1 --dataset synthetic --width 32 --batch 32 --steps 2"
                          " --http-port -1 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[1024];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_EQ(out.find("dashboard"), std::string::npos) << out;
}

}  // namespace
}  // namespace mddp::dashboard::test

// /metrics in the Prometheus text format, checked by promtool (Debian
// package `prometheus`). Without promtool the test skips locally and fails
// in CI (CI=true), where it must be installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "client.h"
#include "fixture.h"

namespace mddp::dashboard::test {
namespace {

namespace fs = std::filesystem;

std::string promtool() {
  for (const char* p : {"/usr/bin/promtool", "/usr/local/bin/promtool"})
    if (fs::exists(p)) return p;
  return "";
}

TEST_F(DashboardTest, MetricsHaveEveryFamily) {
  feed(0, 60);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto r = request(port(), "/metrics");
  ASSERT_EQ(r.result_int(), 200);
  EXPECT_NE(r[http::field::content_type].find("version=0.0.4"), std::string::npos);
  const std::string& text = r.body();
  for (const char* line :
       {"microddp_job_state{job=\"local\",state=\"running\"} 1\n",
        "microddp_job_state{job=\"local\",state=\"failed\"} 0\n",
        "microddp_world_size{job=\"local\"} 2\n", "microddp_step{job=\"local\"} 59\n",
        "microddp_total_steps{job=\"local\"} 1000\n",
        "microddp_phase_seconds{job=\"local\",rank=\"1\",phase=\"forward\"} 0.003\n",
        "microddp_allreduce_bytes_total{job=\"local\",rank=\"0\"} 125829120\n",
        "microddp_metrics_records_total{job=\"local\"} 120\n",
        "# TYPE microddp_allreduce_bytes_total counter\n",
        "# TYPE microddp_heartbeat_age_seconds gauge\n", "# HELP microddp_samples_per_second "})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin\n" << text;
}

TEST_F(DashboardTest, MetricsPassPromtool) {
  const std::string tool = promtool();
  if (tool.empty()) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true")
      FAIL() << "promtool is missing; install the Debian package `prometheus`";
    GTEST_SKIP() << "promtool not installed (apt-get install prometheus); required in CI";
  }
  feed(0, 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const fs::path file = fs::temp_directory_path() / ("mddp-metrics-" + std::to_string(::getpid()));
  std::ofstream(file) << request(port(), "/metrics").body();
  const std::string cmd = tool + " check metrics < " + file.string() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = ::pclose(p);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "") << "promtool lint findings";
  fs::remove(file);
}

}  // namespace
}  // namespace mddp::dashboard::test

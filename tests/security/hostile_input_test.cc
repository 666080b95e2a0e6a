// What the fuzzers found in the readers of files and messages, pinned down
// (their reproducers are in tests/fuzz/corpus/*/regression-*): numbers that
// do not fit their field are refused by name, never converted with
// undefined behaviour or let out as a library's exception.
#include <gtest/gtest.h>

#include <limits>

#include "control/job_config_json.h"
#include "core/common/check.h"
#include "core/common/json_number.h"
#include "core/perf/step_metrics.h"

namespace mddp {
namespace {

using nlohmann::json;

bool refused(const std::function<void()>& f, const std::string& want) {
  try {
    f();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    return true;
  }
  return false;
}

TEST(JsonNumber, TakesOnlyValuesThatFit) {
  EXPECT_EQ(json_number<int>(json(7)), 7);
  EXPECT_EQ(json_number<int>(json(-7)), -7);
  EXPECT_FALSE(json_number<int>(json(int64_t{1} << 40)));
  EXPECT_FALSE(json_number<int>(json(2.5)));
  EXPECT_FALSE(json_number<int>(json("7")));
  EXPECT_FALSE(json_number<uint64_t>(json(-1)));
  EXPECT_EQ(json_number<uint64_t>(json(std::numeric_limits<uint64_t>::max())),
            std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(json_number<int64_t>(json(std::numeric_limits<uint64_t>::max())));
  EXPECT_EQ(json_number<double>(json(3)), 3.0);
  EXPECT_FALSE(json_number<float>(json(1e300)));
  EXPECT_EQ(json_number<float>(json(0.5)), 0.5f);
}

TEST(HostileMetricsRecord, AFloatTooLargeForAnIntegerFieldIsRefused) {
  // (tests/fuzz/metrics_log: 1.8e30 into the int64 start_ns was undefined behaviour.)
  EXPECT_TRUE(refused(
      [] { perf::StepMetrics::from_json(json::parse(R"({"rank":0,"step":1,"start_ns":1.8e30})")); },
      "'start_ns' should be an integer in range"));
  EXPECT_TRUE(refused([] { perf::StepMetrics::from_json(json::parse(R"({"rank":0,"step":2.5})")); },
                      "'step' should be an integer"));
  EXPECT_TRUE(
      refused([] { perf::StepMetrics::from_json(json::parse(R"({"rank":4294967296,"step":1})")); },
              "'rank'"));
  EXPECT_TRUE(refused(
      [] {
        perf::StepMetrics::from_json(
            json::parse(R"({"rank":0,"step":1,"buckets":[{"bytes":-1}]})"));
      },
      "'bytes'"));
  EXPECT_EQ(perf::StepMetrics::from_json(json::parse(R"({"rank":1,"step":7,"loss":0.5})")).step, 7);
}

TEST(HostileJobConfig, NumbersTooLargeAreRefusedNotThrownThrough) {
  // (tests/fuzz/job_config: nlohmann's out_of_range escaped parse_job_config.)
  EXPECT_TRUE(refused([] { control::parse_job_config(R"({"batch": 1e999})"); }, "not valid JSON"));
  EXPECT_TRUE(refused([] { control::parse_job_config(R"({"batch": 18446744073709551615})"); },
                      "'batch' must be an integer in"));
  EXPECT_TRUE(refused([] { control::parse_job_config(R"({"threads": 4294967296})"); },
                      "'threads' must be an integer in -2147483648..2147483647"));
  EXPECT_TRUE(
      refused([] { control::parse_job_config(R"({"optim": {"lr": 1e300}})"); }, "'optim.lr'"));
}

}  // namespace
}  // namespace mddp

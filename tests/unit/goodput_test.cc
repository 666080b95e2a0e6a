// Goodput (core/perf/goodput.h): the time on steps that count over the wall
// time. An attempt's time counts in the share of its steps that no later
// attempt computed again; the gap of a recovery counts in the wall time only.
#include "core/perf/goodput.h"

#include <gtest/gtest.h>

#include <limits>

namespace mddp::perf {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(Goodput, StepsBackToBackAreAllGoodput) {
  Goodput g;
  EXPECT_EQ(g.value(), 0.0);
  for (int64_t step = 1; step <= 10; ++step)
    for (int rank = 0; rank < 3; ++rank) g.add(0, step, 100.0 + rank, step * kSecond / 10);
  EXPECT_NEAR(g.counted_s(), 1.002, 1e-9) << "the attempt's span, not the sum of overlapping steps";
  EXPECT_NEAR(g.wall_s(), 1.002, 1e-9);
  EXPECT_NEAR(g.value(), 1.0, 1e-12);
}

TEST(Goodput, ARecoveryGapAndRedoneStepsAreNotGoodput) {
  Goodput g;
  for (int64_t step = 1; step <= 10; ++step) g.add(0, step, 100, step * kSecond / 10);  // 0..1 s
  // Attempt 1 resumed from step 6's checkpoint after a 2 s recovery: steps
  // 7-10 again, then 11-12; each counts once.
  for (int64_t step = 7; step <= 12; ++step) g.add(1, step, 100, 2 * kSecond + step * kSecond / 10);
  EXPECT_NEAR(g.counted_s(), 1.2, 1e-9);
  EXPECT_NEAR(g.wall_s(), 3.2, 1e-9);
  EXPECT_NEAR(g.value(), 1.2 / 3.2, 1e-9);
  g.add(0, 8, 500, 1 * kSecond);  // a late record of the attempt before changes nothing
  EXPECT_NEAR(g.counted_s(), 1.2, 1e-9);
}

TEST(Goodput, DamagedDurationsAndStepsNeitherOverflowNorAllocate) {
  Goodput g;
  constexpr int64_t kDay = 86'400 * kSecond;
  g.add(0, 1, 1e96, 2 * kDay);  // taken as a day long
  EXPECT_NEAR(g.wall_s(), 86'400.0, 1e-6);
  g.add(0, 2, std::numeric_limits<double>::quiet_NaN(), 2 * kDay + kSecond);  // no time
  g.add(0, 3, -100, 2 * kDay + 2 * kSecond);  // a negative duration is no time
  EXPECT_NEAR(g.wall_s(), 86'402.0, 1e-6);
  EXPECT_NEAR(g.value(), 1.0, 1e-12);
  g.add(0, int64_t{1} << 60, 100, 2 * kDay + 3 * kSecond);  // one entry, not 2^60
  EXPECT_NEAR(g.wall_s(), 86'403.0, 1e-6);
  EXPECT_GE(g.value(), 0.0);
}

}  // namespace
}  // namespace mddp::perf

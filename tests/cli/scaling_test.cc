// cli/scaling: speedup and efficiency, strong and weak, against hand-computed
// values (the what-if of docs/performance.md §1 and the scaling study of
// bench/results/2026-11-22-epyc.md).
#include "cli/scaling.h"

#include <gtest/gtest.h>

#include "core/common/check.h"

namespace mddp::cli {
namespace {

TEST(Scaling, SpeedupAndEfficiencyOfThroughputs) {
  // The scaling study (bench/results/2026-11-22-epyc.md), strong: 256 samples per step in 70.3 ms
  // on one rank, 45.2 ms on two: 3641.5 and 5663.7 samples/s, speedup 70.3 / 45.2.
  const double s = speedup(256 / 0.0452, 256 / 0.0703);
  EXPECT_NEAR(s, 1.5553, 1e-4);
  EXPECT_NEAR(efficiency(s, 2), 0.7777, 1e-4);  // speedup / n
  // nothing measured: 0, not a division by zero
  EXPECT_EQ(speedup(0, 100), 0.0);
  EXPECT_EQ(speedup(100, 0), 0.0);
  EXPECT_EQ(efficiency(2.0, 0), 0.0);
}

TEST(Scaling, ComputePerRank) {
  // 400 ms at n = 1: strong splits the global batch, weak keeps each rank's
  EXPECT_DOUBLE_EQ(compute_per_rank(Scaling::kStrong, 0.4, 4), 0.1);
  EXPECT_DOUBLE_EQ(compute_per_rank(Scaling::kStrong, 0.4, 1), 0.4);
  EXPECT_DOUBLE_EQ(compute_per_rank(Scaling::kWeak, 0.4, 4), 0.4);
}

TEST(Scaling, StrongSpeedupIsTheStepRatio) {
  // docs/performance.md §1: 25M parameters, 400 ms compute, 4 ranks, no
  // overlap: step 100 + 120.6 = 220.6 ms; speedup 400 / 220.6 = 1.8132,
  // efficiency 1.8132 / 4 = 0.4533 (the table's 1.81 and 45 %).
  const double s = speedup_from_steps(Scaling::kStrong, 0.4, 0.2206, 4);
  EXPECT_NEAR(s, 1.81324, 1e-5);
  EXPECT_NEAR(efficiency(s, 4), 0.45331, 1e-5);
  // with overlap at 8 ranks: c = 50 ms, t = 141.4 ms > c f, so the step is
  // c (1 - f) + t = 50/3 + 141.4 = 158.067 ms: speedup 2.5306, efficiency 31.6 %
  const double s8 = speedup_from_steps(Scaling::kStrong, 0.4, 0.4 / 8 / 3 + 0.1414, 8);
  EXPECT_NEAR(s8, 2.53058, 1e-5);
  EXPECT_NEAR(efficiency(s8, 8), 0.31632, 1e-5);
}

TEST(Scaling, WeakSpeedupCountsNTimesTheSamples) {
  // Same job, weak: every rank keeps 400 ms of compute, the step on 4 ranks is
  // 400 + 120.6 = 520.6 ms for 4 times the samples: speedup 4 x 400 / 520.6
  // = 3.0734, efficiency 0.7683.
  const double s = speedup_from_steps(Scaling::kWeak, 0.4, 0.5206, 4);
  EXPECT_NEAR(s, 3.07338, 1e-5);
  EXPECT_NEAR(efficiency(s, 4), 0.76834, 1e-5);
  // The scaling study, measured weak: 21.3 ms on one rank, 28.0 ms on
  // two (2 x 21.3 / 28.0 = 1.521), 64.3 ms on four (4 x 21.3 / 64.3 = 1.325)
  EXPECT_NEAR(speedup_from_steps(Scaling::kWeak, 21.3, 28.0, 2), 1.5214, 1e-4);
  EXPECT_NEAR(speedup_from_steps(Scaling::kWeak, 21.3, 64.3, 4), 1.3250, 1e-4);
  // a step no slower than one rank's is perfect scaling in either regime
  EXPECT_DOUBLE_EQ(efficiency(speedup_from_steps(Scaling::kWeak, 0.4, 0.4, 8), 8), 1.0);
  EXPECT_DOUBLE_EQ(efficiency(speedup_from_steps(Scaling::kStrong, 0.4, 0.05, 8), 8), 1.0);
  EXPECT_EQ(speedup_from_steps(Scaling::kWeak, 0, 0.4, 2), 0.0);  // not measured
}

TEST(Scaling, ParseWorldSizesAndScaling) {
  EXPECT_EQ(parse_world_sizes("1,2,4", "--world-size"), (std::vector<int>{1, 2, 4}));
  EXPECT_THROW(parse_world_sizes("4,2", "--world-size"), InputError);
  EXPECT_THROW(parse_world_sizes("0", "--world-size"), InputError);
  EXPECT_THROW(parse_world_sizes("2x", "--world-size"), InputError);
  EXPECT_EQ(parse_scaling("weak"), Scaling::kWeak);
  EXPECT_THROW(parse_scaling("linear"), InputError);
}

}  // namespace
}  // namespace mddp::cli

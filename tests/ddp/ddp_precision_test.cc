// --precision bf16 and fp16 under DDP: N ranks (threads over real
// transports) against one process on the whole batch at the same precision.
//
// Tolerance. The single process multiplies in 16 bits and averages nothing;
// the ranks multiply their shards in 16 bits and all-reduce the gradients
// in 16 bits (the default under --precision) with fp32 accumulation. Each
// wire rounding moves a gradient by at most 2^-9 (bf16) or 2^-12 (fp16)
// relative, once per hop; after kPrecisionSteps SGD steps the parameters differ by up
// to ~1.1e-3 relative (norm-wise, measured: bf16, 3 ranks), so the bound is
// kTolerance = 5e-3 (fp32
// DDP is held to 1e-5: ddp_equivalence_test.cc). fp16 starts from a loss
// scale of 128, which overflows on neither side: a step skipped by one side
// only would be a different training run, not a rounding difference.
#include <gtest/gtest.h>

#include "core/train/mixed_precision.h"
#include "ddp/ddp_fixture.h"

namespace mddp::test {
namespace {

constexpr int kPrecisionSteps = 4;
constexpr double kTolerance = 5e-3;

struct PrecisionCase {
  std::string precision, model;
  int world;
  std::string name() const { return precision + "_" + model + "_w" + std::to_string(world); }
};

void PrintTo(const PrecisionCase& c, std::ostream* os) {
  *os << c.name();
}

class DdpPrecisionTest : public ::testing::TestWithParam<PrecisionCase> {};

TEST_P(DdpPrecisionTest, MatchesOneProcessAtTheSamePrecision) {
  const PrecisionCase c = GetParam();
  train::TrainConfig cfg = ddp_config(c.model, "bucketed", 0.001);
  cfg.precision = c.precision;
  cfg.loss_scale.init = 128.0f;
  ASSERT_EQ(train::effective_compress(cfg), c.precision) << "gradients travel in 16 bits";
  const auto ranks = train_ranks(cfg, c.world, comm::TransportKind::kTcp, kPrecisionSteps);
  expect_identical_across_ranks(ranks);
  const Params single = train_single(cfg, kPrecisionSteps);
  expect_close(ranks[0], single, kTolerance, c.name());
  // The precision took effect: fp32 training lands measurably elsewhere.
  train::TrainConfig fp32 = cfg;
  fp32.precision = "fp32";
  const Params reference = train_single(fp32, kPrecisionSteps);
  double worst = 0;
  for (std::size_t p = 0; p < single.size(); ++p)
    worst = std::max(worst, rel_error(single[p], reference[p]));
  EXPECT_GT(worst, 1e-5) << c.precision << " trained bitwise like fp32";
}

INSTANTIATE_TEST_SUITE_P(Precisions, DdpPrecisionTest,
                         ::testing::Values(PrecisionCase{"bf16", "mlp", 2},
                                           PrecisionCase{"bf16", "mlp", 3},
                                           PrecisionCase{"bf16", "cnn", 2},
                                           PrecisionCase{"fp16", "mlp", 2},
                                           PrecisionCase{"fp16", "cnn", 3}),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace mddp::test

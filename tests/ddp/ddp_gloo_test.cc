// DDP over the gloo backend (--backend gloo) must train the same model as
// one process on the whole batch, as it must over microddp's own
// collectives (ddp_equivalence_test.cc): every DDP mode and bucket size,
// gradient accumulation, 16-bit compression and local SGD, on 2 to 4
// thread-ranks over gloo's TCP.
#include <gtest/gtest.h>

#include "ddp/ddp_fixture.h"

namespace mddp::test {
namespace {

constexpr int kGlooSteps = 4;

train::TrainConfig over_gloo(train::TrainConfig cfg) {
  cfg.dist.backend = "gloo";
  return cfg;
}

struct GlooCase {
  int world;
  std::string mode;
  double bucket_mb;
  std::string model;
  std::string name() const {
    return model + "_w" + std::to_string(world) + "_" + mode + "_" +
           std::to_string(static_cast<int>(bucket_mb * 1e6)) + "B";
  }
};

void PrintTo(const GlooCase& c, std::ostream* os) {
  *os << c.name();
}

class DdpGlooTest : public ::testing::TestWithParam<GlooCase> {};

TEST_P(DdpGlooTest, MatchesOneProcessOnTheWholeBatch) {
  const GlooCase c = GetParam();
  const train::TrainConfig cfg = over_gloo(ddp_config(c.model, c.mode, c.bucket_mb));
  const auto ranks = train_ranks(cfg, c.world, comm::TransportKind::kTcp, kGlooSteps);
  expect_identical_across_ranks(ranks);
  expect_close(ranks[0], train_single(cfg, kGlooSteps), 1e-5, c.name());
}

std::vector<GlooCase> cases() {
  std::vector<GlooCase> v;
  for (int world : {2, 3, 4})
    for (const char* model : {"mlp", "cnn"}) {
      v.push_back({world, "naive", 25, model});
      v.push_back({world, "hooked", 25, model});
      v.push_back({world, "bucketed", 25, model});
      v.push_back({world, "bucketed", 0.001, model});
      v.push_back({world, "bucketed", 0.000001, model});  // every parameter its own bucket
    }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Modes, DdpGlooTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(DdpGloo, AccumulationMatchesOneProcessWithKTimesTheBatch) {
  train::TrainConfig cfg = over_gloo(mlp_config());
  cfg.accumulate = 3;
  const auto ranks = train_ranks(cfg, 2, comm::TransportKind::kTcp, kGlooSteps);
  expect_identical_across_ranks(ranks);
  expect_close(ranks[0], train_single(cfg, kGlooSteps), 1e-5, "accumulate 3");
}

TEST(DdpGloo, CompressionIsWithinTheDocumentedTolerance) {
  for (auto [compress, tol] : {std::pair{"fp16", 1e-3}, std::pair{"bf16", 1e-2}}) {
    train::TrainConfig cfg = over_gloo(mlp_config());
    cfg.dist.compress = compress;
    const auto ranks = train_ranks(cfg, 3, comm::TransportKind::kTcp, kGlooSteps);
    expect_identical_across_ranks(ranks);
    expect_close(ranks[0], train_single(cfg, kGlooSteps), tol, compress);
  }
}

TEST(DdpGloo, LocalSgdReplicasAgreeAfterEachAverage) {
  train::TrainConfig cfg = over_gloo(mlp_config());
  cfg.dist.local_sgd = 2;
  expect_identical_across_ranks(train_ranks(cfg, 2, comm::TransportKind::kTcp, 4));
}

}  // namespace
}  // namespace mddp::test

// After ONE backward, every parameter's gradient on every rank must equal the
// average of the ranks' local gradients, computed independently here from
// plain (non-DDP) replicas. A bucketed DDP that copies gradients into its
// buckets and misses some on the way back fails exactly this (those
// parameters keep their local gradient), so it is checked for every mode
// and several bucket caps, including one parameter per bucket.
#include <gtest/gtest.h>

#include "core/comm/memory_store.h"
#include "core/comm/transport/connect.h"
#include "core/train/distributed.h"
#include "ddp/ddp_fixture.h"
#include "support/ranks.h"

namespace mddp::test {
namespace {

struct GradCase {
  int world;
  std::string mode;
  double bucket_mb;
  std::string model;  // mlp | cnn
  std::string name() const {
    return model + "_w" + std::to_string(world) + "_" + mode + "_" +
           std::to_string(static_cast<int>(bucket_mb * 1e6)) + "B";
  }
};

void PrintTo(const GradCase& c, std::ostream* os) {
  *os << c.name();
}

class DdpGradTest : public ::testing::TestWithParam<GradCase> {};

Params grads_of(nn::Module& m) {
  Params out;
  for (nn::Parameter* p : m.parameters()) out.push_back(p->grad.to_vector());
  return out;
}

TEST_P(DdpGradTest, EveryGradientIsTheAverageOfTheLocalGradients) {
  const GradCase c = GetParam();
  const train::TrainConfig cfg = ddp_config(c.model, c.mode, c.bucket_mb);

  std::vector<Params> local(c.world), synced(c.world);
  comm::MemoryStore store;
  run_threads(
      c.world,
      [&](int rank) {
        // Reference: this rank's own gradient, from a replica with no DDP at all.
        train::Trainer plain(cfg, rank, c.world);
        train::StepHooks capture;
        capture.after_backward = [&] { local[rank] = grads_of(plain.model()); };
        plain.step(capture);

        auto t = comm::connect_transport(store, rank, c.world, {"grad-test", 0, ""},
                                         comm::TransportKind::kTcp, std::chrono::seconds(20));
        train::DistributedTrainer dt(
            cfg, std::make_unique<comm::Communicator>(std::move(t), train::comm_options(cfg)));
        train::StepHooks hooks = dt.loop_hooks().step;
        hooks.after_backward = [&, wait = hooks.after_backward] {
          wait();
          synced[rank] = grads_of(dt.trainer().model());
        };
        dt.trainer().step(hooks);
      },
      std::chrono::seconds(60));

  const std::size_t n_params = local[0].size();
  // The test could not fail if every rank had the same gradient: make sure they differ.
  double spread = 0;
  for (std::size_t p = 0; p < n_params; ++p)
    spread = std::max(spread, rel_error(local[1][p], local[0][p]));
  ASSERT_GT(spread, 1e-3) << "ranks' local gradients are identical; the check would be vacuous";

  int wrong = 0;
  for (std::size_t p = 0; p < n_params; ++p) {
    std::vector<float> mean(local[0][p].size(), 0.0f);
    for (int r = 0; r < c.world; ++r)
      for (std::size_t i = 0; i < mean.size(); ++i)
        mean[i] += local[r][p][i] / static_cast<float>(c.world);
    for (int r = 0; r < c.world; ++r) {
      const double err = rel_error(synced[r][p], mean);
      if (err > 1e-5) ++wrong;
      EXPECT_LE(err, 1e-5) << "parameter " << p << " on rank " << r << " is not the average";
    }
  }
  EXPECT_EQ(wrong, 0) << wrong << " of " << n_params * c.world
                      << " (parameter, rank) gradients not averaged";
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> cases;
  for (int world : {2, 3})
    for (const char* model : {"mlp", "cnn"}) {
      cases.push_back({world, "naive", 25, model});
      cases.push_back({world, "hooked", 25, model});
      cases.push_back({world, "bucketed", 25, model});        // one bucket for the whole model
      cases.push_back({world, "bucketed", 0.0005, model});    // a few parameters per bucket
      cases.push_back({world, "bucketed", 0.000001, model});  // every parameter its own bucket
    }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Modes, DdpGradTest, ::testing::ValuesIn(grad_cases()),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace mddp::test

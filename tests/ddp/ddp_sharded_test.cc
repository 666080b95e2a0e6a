// --ddp sharded (ZeRO-1, core/ddp/sharded_sync.h): the gradients are
// reduce-scattered, each rank updates its shard with its 1/n of the
// optimiser state, the parameters are all-gathered. It must train the same
// model as one process (every optimiser, with accumulation, shards that do
// not divide the parameters evenly), bitwise the bucketed run where the
// sums agree (2 ranks, ring), and its checkpoints must hold the whole state:
// a resumed run is bitwise the uninterrupted one, sharded or not.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/comm/memory_store.h"
#include "core/comm/transport/connect.h"
#include "core/common/temp_dir.h"
#include "core/train/checkpoint.h"
#include "core/train/distributed.h"
#include "core/train/loop.h"
#include "core/train/sharded_optimizer.h"
#include "ddp/ddp_fixture.h"
#include "support/ranks.h"

namespace mddp::test {
namespace {

constexpr int kSteps = 4;
constexpr auto kTcp = comm::TransportKind::kTcp;

struct Optim {
  std::string name;
  nn::OptimizerConfig cfg;
};
std::vector<Optim> every_optimiser() {
  return {{"sgd", {.name = "sgd", .lr = 0.05f}},
          {"momentum", {.name = "sgd", .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f}},
          {"adam", {.name = "adam", .lr = 0.01f, .weight_decay = 1e-3f}}};
}

train::TrainConfig sharded_config(const nn::OptimizerConfig& optim) {
  train::TrainConfig cfg = mlp_config();
  cfg.optim = optim;
  cfg.dist.ddp = "sharded";
  return cfg;
}

int64_t parameter_count(const train::TrainConfig& cfg) {
  train::Trainer t(cfg);
  int64_t n = 0;
  for (nn::Parameter* p : t.model().parameters()) n += p->value.numel();
  return n;
}

// 3 ranks: the model's parameter count is not a multiple of 3, so the
// single bucket is padded and its shards cut parameters in two.
TEST(DdpSharded, EveryOptimiserWithAccumulationMatchesOneProcess) {
  ASSERT_NE(parameter_count(mlp_config()) % 3, 0) << "the test needs uneven shards";
  for (const Optim& o : every_optimiser())
    for (int k : {1, 3})
      for (double bucket_mb : {25.0, 0.001}) {  // one bucket; several
        const std::string what =
            o.name + " accumulate " + std::to_string(k) + " bucket " + std::to_string(bucket_mb);
        SCOPED_TRACE(what);
        train::TrainConfig cfg = sharded_config(o.cfg);
        cfg.accumulate = k;
        cfg.dist.bucket_mb = cfg.dist.first_bucket_mb = bucket_mb;
        const auto ranks = train_ranks(cfg, 3, kTcp, kSteps);
        expect_identical_across_ranks(ranks);
        expect_close(ranks[0], train_single(cfg, kSteps), 1e-5, what);
      }
}

// Two ranks sum a+b in either order with the same bits, so the
// reduce-scatter's shards give the all-reduce's averages exactly; the
// element-wise update and the all-gather then leave bucketed's parameters.
TEST(DdpSharded, BitwiseTheBucketedRunOnTwoRanks) {
  for (const Optim& o : every_optimiser()) {
    SCOPED_TRACE(o.name);
    train::TrainConfig cfg = sharded_config(o.cfg);
    cfg.dist.algorithm = "ring";
    cfg.accumulate = 2;
    train::TrainConfig bucketed = cfg;
    bucketed.dist.ddp = "bucketed";
    EXPECT_EQ(train_ranks(cfg, 2, kTcp, kSteps)[0], train_ranks(bucketed, 2, kTcp, kSteps)[0]);
  }
}

// --compress fp16/bf16: the buckets are reduce-scattered as 16 bits. On two
// ranks the ring's blocks are the shards and a+b rounds alike in either
// order, so the result is bitwise bucketed mode's 16-bit all-reduce; on
// three (uneven shards) it matches one process within verify's 16-bit bound
// (SGD: Adam would amplify the rounding, cmd_verify.cc).
TEST(DdpSharded, SixteenBitGradientsAsBucketedModeSendsThem) {
  for (const char* compress : {"fp16", "bf16"}) {
    SCOPED_TRACE(compress);
    train::TrainConfig cfg = sharded_config({.name = "sgd", .lr = 0.05f, .momentum = 0.9f});
    cfg.dist.compress = compress;
    cfg.dist.algorithm = "ring";
    train::TrainConfig bucketed = cfg;
    bucketed.dist.ddp = "bucketed";
    EXPECT_EQ(train_ranks(cfg, 2, kTcp, kSteps)[0], train_ranks(bucketed, 2, kTcp, kSteps)[0]);
    const auto three = train_ranks(cfg, 3, kTcp, kSteps);
    expect_identical_across_ranks(three);
    train::TrainConfig single = cfg;
    single.dist.compress = "none";
    expect_close(three[0], train_single(single, kSteps), 5e-3, compress);
  }
}

// Each rank keeps 1/n of Adam's two moments: together exactly the padded
// parameter count, twice.
TEST(DdpSharded, EachRankKeepsOneNthOfTheOptimiserState) {
  const train::TrainConfig cfg = sharded_config({.name = "adam", .lr = 0.01f});
  const int64_t params = parameter_count(cfg);
  const int world = 3;
  const int64_t padded = (params + world - 1) / world * world;
  std::vector<int64_t> held(world);
  comm::MemoryStore store;
  run_threads(
      world,
      [&](int rank) {
        auto t = comm::connect_transport(store, rank, world, {"state", 0, ""}, kTcp,
                                         std::chrono::seconds(20));
        train::DistributedTrainer dt(
            cfg, std::make_unique<comm::Communicator>(std::move(t), train::comm_options(cfg)));
        auto* opt = dynamic_cast<train::ShardedOptimizer*>(&dt.trainer().optimizer());
        ASSERT_NE(opt, nullptr) << "--ddp sharded did not install the sharded optimiser";
        held[rank] = opt->state_numel();
      },
      std::chrono::seconds(60));
  for (int r = 0; r < world; ++r) EXPECT_EQ(held[r], 2 * padded / world) << "rank " << r;
}

// Runs the training loop on `world` ranks as the worker does: rank 0 alone
// has the run directory, the checkpoint schedule and the resume point.
Params run_job(train::TrainConfig cfg, int world) {
  static std::atomic<int> job{0};
  const std::string prefix = "sharded-job" + std::to_string(job++);
  comm::MemoryStore store;
  Params out;
  run_threads(
      world,
      [&](int rank) {
        train::TrainConfig mine = cfg;
        if (rank != 0) {
          mine.run_dir.clear();
          mine.checkpoint_every = 0;
          mine.resume.clear();
        }
        auto t = comm::connect_transport(store, rank, world, {"ckpt", 0, ""}, kTcp,
                                         std::chrono::seconds(20), "127.0.0.1", prefix);
        train::DistributedTrainer dt(
            mine, std::make_unique<comm::Communicator>(std::move(t), train::comm_options(mine)));
        train::LoopHooks hooks = dt.loop_hooks();
        hooks.print = rank == 0 && !mine.run_dir.empty();
        train::run_training(dt.trainer(), hooks);
        if (rank == 0) out = snapshot(dt.trainer().model());
      },
      std::chrono::seconds(120));
  return out;
}

// A sharded job stopped at step 2 (its periodic and final checkpoints
// gathered from both ranks) and resumed — sharded, or as bucketed — ends
// bitwise where the uninterrupted sharded job does.
TEST(DdpSharded, CheckpointHoldsTheWholeStateAndResumesBitwiseShardedOrNot) {
  for (const Optim& o : every_optimiser()) {
    if (o.cfg.momentum == 0.0f && o.cfg.name == "sgd") continue;  // no state to shard
    SCOPED_TRACE(o.name);
    train::TrainConfig cfg = sharded_config(o.cfg);
    cfg.dist.algorithm = "ring";
    cfg.steps = kSteps;
    const Params whole = run_job(cfg, 2);

    const std::string dir = make_temp_dir("mddp-sharded-ckpt");
    train::TrainConfig first = cfg;
    first.steps = kSteps / 2;
    first.run_dir = dir;
    first.checkpoint_every = 1;
    run_job(first, 2);

    // The state file is the unsharded optimiser's: a bucketed job's, bitwise.
    const std::string bucketed_dir = make_temp_dir("mddp-bucketed-ckpt");
    train::TrainConfig bucketed_first = first;
    bucketed_first.dist.ddp = "bucketed";
    bucketed_first.run_dir = bucketed_dir;
    run_job(bucketed_first, 2);
    const train::Checkpoint sharded_ckpt = train::read_checkpoint(train::find_checkpoint(dir));
    const train::Checkpoint bucketed_ckpt =
        train::read_checkpoint(train::find_checkpoint(bucketed_dir));
    ASSERT_EQ(sharded_ckpt.state.tensors.size(), bucketed_ckpt.state.tensors.size());
    for (std::size_t i = 0; i < sharded_ckpt.state.tensors.size(); ++i) {
      EXPECT_EQ(sharded_ckpt.state.tensors[i].name, bucketed_ckpt.state.tensors[i].name);
      EXPECT_EQ(sharded_ckpt.state.tensors[i].value.to_vector(),
                bucketed_ckpt.state.tensors[i].value.to_vector())
          << sharded_ckpt.state.tensors[i].name;
    }

    for (const char* mode : {"sharded", "bucketed"}) {
      train::TrainConfig resumed = cfg;
      resumed.dist.ddp = mode;
      resumed.resume = dir;
      EXPECT_EQ(run_job(resumed, 2), whole) << "resumed " << mode;
    }
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(bucketed_dir);
  }
}

// What ZeRO-1 cannot be combined with is refused at start, saying why.
TEST(DdpSharded, RefusesCompressionAndLocalSgd) {
  const auto refused = [](train::TrainConfig cfg, const std::string& want) {
    comm::MemoryStore store;
    const auto errors = run_threads_collect(
        2,
        [&](int rank) {
          auto t = comm::connect_transport(store, rank, 2, {"refuse", 0, ""}, kTcp,
                                           std::chrono::seconds(20));
          train::DistributedTrainer dt(
              cfg, std::make_unique<comm::Communicator>(std::move(t), train::comm_options(cfg)));
        },
        std::chrono::seconds(60));
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(errors[r]) << "rank " << r << " accepted " << want;
      EXPECT_NE(what_of(errors[r]).find(want), std::string::npos) << what_of(errors[r]);
    }
  };
  train::TrainConfig compressed = sharded_config({.name = "sgd", .lr = 0.05f});
  compressed.dist.compress = "topk:0.1";
  refused(compressed, "--compress topk:0.1 sends something else");
  train::TrainConfig local = sharded_config({.name = "sgd", .lr = 0.05f});
  local.dist.local_sgd = 2;
  refused(local, "--local-sgd");
}

}  // namespace
}  // namespace mddp::test

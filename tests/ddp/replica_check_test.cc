// The replica check (core/train/replica_check.h): the verdict on tables whose
// answer is known; and with real ranks over real transports, no false alarm
// however the gradients are summed, and the rank whose bit was flipped
// (MDDP_LAB_FAULT=flip:RANK:STEP) named at the next check, by every rank.
#include "core/train/replica_check.h"

#include <gtest/gtest.h>
#include <mddp/config.h>
#include <stdlib.h>

#include "core/comm/gloo/gloo.h"
#include "core/comm/memory_store.h"
#include "core/comm/transport/connect.h"
#include "core/common/check.h"
#include "core/train/distributed.h"
#include "core/train/loop.h"
#include "ddp/ddp_fixture.h"
#include "support/ranks.h"

namespace mddp::test {
namespace {

const std::vector<std::string> kNames = {"a", "b", "c", "d", "e"};

// The verdict on `world` ranks' hashes of tensors a..e: all the same, but
// for the (rank, tensor) pairs in `odd`.
std::string verdict(int world, const std::vector<std::pair<int, int>>& odd = {}) {
  std::vector<uint64_t> all(static_cast<std::size_t>(world) * kNames.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = 100 + i % kNames.size();
  for (auto [rank, tensor] : odd)
    all.at(static_cast<std::size_t>(rank) * kNames.size() + tensor) ^= 1;
  return train::replica_divergence(kNames, all, world);
}

TEST(ReplicaDivergence, RanksThatAgreeGiveNoVerdict) {
  EXPECT_EQ(verdict(1), "");
  EXPECT_EQ(verdict(4), "");
}

TEST(ReplicaDivergence, TheOddRankAndItsTensorsAreNamed) {
  EXPECT_EQ(verdict(4, {{2, 1}}), "rank 2 differs from ranks 0, 1, 3 in b");
  EXPECT_EQ(verdict(3, {{0, 0}, {0, 4}}), "rank 0 differs from ranks 1, 2 in a, e");
  EXPECT_EQ(verdict(3, {{1, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}}),
            "rank 1 differs from ranks 0, 2 in a, b, c and 2 more tensors");
}

TEST(ReplicaDivergence, RanksThatDifferAlikeAreOneGroupAndEachGroupIsNamed) {
  EXPECT_EQ(verdict(5, {{1, 3}, {3, 3}}), "ranks 1, 3 differ from ranks 0, 2, 4 in d");
  EXPECT_EQ(verdict(6, {{1, 3}, {3, 3}, {5, 0}}),
            "ranks 1, 3 differ from ranks 0, 2, 4 in d; rank 5 differs from ranks 0, 2, 4 in a");
}

// With two ranks (or any tie) nothing says which is odd: rank 0's group is the job's.
TEST(ReplicaDivergence, OnATieRankZerosGroupIsTheJobs) {
  EXPECT_EQ(verdict(2, {{0, 2}}), "rank 1 differs from rank 0 in c");
  EXPECT_EQ(verdict(4, {{2, 2}, {3, 2}}), "ranks 2, 3 differ from ranks 0, 1 in c");
}

TEST(ReplicaDigest, OneFlippedBitChangesThatTensorsHashAlone) {
  train::TrainConfig cfg = mlp_config();
  cfg.optim.name = "adam";
  train::Trainer a(cfg), b(cfg);
  a.step();
  b.step();
  const train::ReplicaDigest da = train::replica_digest(a.model(), &a.optimizer());
  EXPECT_EQ(da.hashes, train::replica_digest(b.model(), &b.optimizer()).hashes);
  // Parameters, then Adam's two moments of each.
  const std::size_t params = a.model().parameters().size();
  ASSERT_EQ(da.names.size(), 3 * params);
  EXPECT_EQ(da.names[params], a.model().parameters()[0]->name + ".exp_avg");
  EXPECT_EQ(train::replica_digest(a.model(), nullptr).names.size(), params);

  tensor::Tensor& w = b.model().parameters()[1]->value;
  std::vector<float> v = w.to_vector();
  v.back() = std::nextafter(v.back(), 1e9f);
  w.copy_from(v);
  const train::ReplicaDigest db = train::replica_digest(b.model(), &b.optimizer());
  for (std::size_t i = 0; i < da.names.size(); ++i)
    EXPECT_EQ(da.hashes[i] != db.hashes[i], i == 1) << da.names[i];
}

struct Ranks {
  int world;
  comm::TransportKind transport;
  std::string algo, mode, compress;
  int64_t local_sgd;
  std::string backend;
  std::string name() const {
    std::string n = std::to_string(world) + "_" + comm::to_string(transport) + "_" + algo + "_" +
                    mode + (compress == "none" ? "" : "_" + compress) +
                    (local_sgd ? "_localsgd" : "") + (backend == "gloo" ? "_gloo" : "");
    for (char& ch : n)
      if (ch == ':' || ch == '.') ch = '_';
    return n;
  }
};

// Trains `steps` steps through run_training (the loop that runs the check)
// on c.world threads, each over its own connection of c.transport; returns
// each rank's error ("" when it finished).
std::vector<std::string> train_checked(const Ranks& c, train::TrainConfig cfg, int64_t steps) {
  static std::atomic<int> jobs{0};
  cfg.steps = steps;
  cfg.optim = {.name = "adam", .lr = 0.01f};
  cfg.dist.algorithm = c.algo;
  cfg.dist.ddp = c.mode;
  cfg.dist.compress = c.compress;
  cfg.dist.local_sgd = c.local_sgd;
  cfg.dist.backend = c.backend;
  comm::MemoryStore store;
  const std::string prefix = "replicas" + std::to_string(jobs++);
  std::vector<std::string> errors(static_cast<std::size_t>(c.world));
  const auto failures = run_threads_collect(
      c.world,
      [&](int rank) {
        train::TrainConfig mine = cfg;
        std::unique_ptr<comm::ProcessGroup> pg;
        if (c.backend == "gloo") {
          pg = comm::gloo::connect_gloo(store, rank, c.world,
                                        {std::chrono::seconds(20), "127.0.0.1", prefix});
        } else {
          auto t =
              comm::connect_transport(store, rank, c.world, {"replica-test", 0, "secret"},
                                      c.transport, std::chrono::seconds(20), "127.0.0.1", prefix);
          pg = std::make_unique<comm::Communicator>(std::move(t), train::comm_options(mine));
        }
        train::DistributedTrainer dt(mine, std::move(pg));
        train::LoopHooks hooks = dt.loop_hooks();
        hooks.print = false;
        train::run_training(dt.trainer(), hooks);
      },
      std::chrono::seconds(120));
  for (std::size_t r = 0; r < failures.size(); ++r) {
    if (!failures[r]) continue;
    try {
      std::rethrow_exception(failures[r]);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  }
  return errors;
}

void PrintTo(const Ranks& c, std::ostream* os) {
  *os << c.name();
}

class ReplicaCheck : public ::testing::TestWithParam<Ranks> {};

// Every way of summing the gradients gives every rank bitwise the same
// update, so a check at every step never fires.
TEST_P(ReplicaCheck, RanksThatTrainCorrectlyPassEveryCheck) {
  train::TrainConfig cfg = mlp_config();
  cfg.dist.check_replicas_every = 1;
  for (const std::string& error : train_checked(GetParam(), cfg, 6)) EXPECT_EQ(error, "");
}

// MDDP_LAB_FAULT's bit flip on rank 1 after step 3: the check every 2 steps
// stops every rank at step 4, naming rank 1 and the weight. Under ZeRO-1
// the flipped value (the first of the weight) is in rank 0's shard, and
// every step ends with each rank's parameters gathered from their shards'
// owners: the flip is overwritten at step 4, and every rank finishes. Local
// SGD (every 2 steps) averages the parameters at step 4: every rank takes
// the same average (the flip in it), and finishes too.
TEST_P(ReplicaCheck, AFlippedBitIsNamedAtTheNextCheck) {
  const Ranks c = GetParam();
  train::TrainConfig cfg = mlp_config();
  cfg.dist.check_replicas_every = 2;
  ::setenv("MDDP_LAB_FAULT", "flip:1:3", 1);
  const auto errors = train_checked(c, cfg, 8);
  ::unsetenv("MDDP_LAB_FAULT");
  std::string others;
  for (int r = 2; r < c.world; ++r) others += ", " + std::to_string(r);
  const std::string first = train::Trainer(cfg).model().parameters().front()->name;
  const std::string want = "the replicas diverged by step 4: rank 1 differs from " +
                           std::string(c.world > 2 ? "ranks 0" : "rank 0") + others + " in " +
                           first + " (";
  for (const std::string& error : errors) {
    if (c.mode == "sharded" || c.local_sgd > 0)
      EXPECT_EQ(error, "");
    else
      EXPECT_NE(error.find(want), std::string::npos) << error;
  }
}

std::vector<Ranks> cases() {
  using T = comm::TransportKind;
  std::vector<Ranks> out;
  for (const char* algo : {"ring", "naive", "tree", "doubling"})
    out.push_back({3, T::kTcp, algo, "bucketed", "none", 0, "cpu"});
  for (const char* mode : {"naive", "hooked", "sharded"})
    out.push_back({3, T::kShm, "ring", mode, "none", 0, "cpu"});
  out.push_back({4, T::kShm, "doubling", "bucketed", "none", 0, "cpu"});
  out.push_back({2, T::kTcp, "ring", "bucketed", "powersgd:2", 0, "cpu"});
  out.push_back({3, T::kTcp, "ring", "bucketed", "bf16", 0, "cpu"});
  out.push_back({3, T::kTcp, "ring", "bucketed", "none", 2, "cpu"});
#if MDDP_HAVE_GLOO
  out.push_back({3, T::kTcp, "auto", "bucketed", "none", 0, "gloo"});
#endif
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ways, ReplicaCheck, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace mddp::test

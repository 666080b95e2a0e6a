// Note [Survivors train on] (core/train/distributed.cc): ranks that outlived
// a failed one re-form a smaller group in their processes with the Trainers
// they kept. One survivor may be a step ahead (its step completed before the
// failure reached it); after the re-form every survivor holds the furthest
// one's parameters, optimiser state and step, bit for bit, whichever rank
// it has, and then they train on as one job. A newcomer (--on-failure heal)
// takes that state from the live ranks: the job it joins trains on exactly
// as if no rank had been lost.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "core/comm/memory_store.h"
#include "core/comm/transport/connect.h"
#include "core/train/distributed.h"
#include "ddp/ddp_fixture.h"
#include "support/ranks.h"

namespace mddp::test {
namespace {

std::vector<std::vector<float>> optimiser_state(train::Trainer& t) {
  std::vector<std::vector<float>> out;
  for (auto& [name, s] : t.optimizer().state()) out.push_back(s.to_vector());
  return out;
}

// Two kept trainers at `steps[0]` and `steps[1]` steps (each trained alone,
// as one process on the whole batch), re-formed as ranks 0 and 1.
void reform_and_check(const std::array<int, 2>& steps) {
  train::TrainConfig cfg = ddp_config("mlp", "bucketed", 25);
  cfg.optim = {.name = "adam", .lr = 1e-2f};
  std::array<std::unique_ptr<train::Trainer>, 2> kept;
  for (int r = 0; r < 2; ++r) {
    kept[r] = std::make_unique<train::Trainer>(cfg);
    for (int s = 0; s < steps[r]; ++s) kept[r]->step();
  }
  const int furthest = steps[1] > steps[0] ? 1 : 0;
  const Params want = snapshot(kept[furthest]->model());
  const auto want_state = optimiser_state(*kept[furthest]);
  const int64_t want_steps = steps[furthest];

  comm::MemoryStore store;
  std::array<Params, 2> got;
  run_threads(
      2,
      [&](int rank) {
        auto t = comm::connect_transport(store, rank, 2, {"survivors", 1, ""},
                                         comm::TransportKind::kTcp, std::chrono::seconds(20));
        std::shared_ptr<comm::ProcessGroup> group =
            std::make_shared<comm::Communicator>(std::move(t), train::comm_options(cfg));
        kept[rank]->set_world(rank, 2, cfg);
        train::DistributedTrainer dt(kept[rank], group);
        EXPECT_EQ(dt.trainer().steps_done(), want_steps) << "rank " << rank;
        EXPECT_EQ(dt.trainer().optimizer().steps(), want_steps) << "rank " << rank;
        EXPECT_EQ(optimiser_state(dt.trainer()), want_state) << "rank " << rank;
        got[rank] = snapshot(dt.trainer().model());
        dt.step();  // and they train on together
        EXPECT_EQ(dt.trainer().steps_done(), want_steps + 1);
      },
      std::chrono::seconds(60));
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].size(), want.size());
    for (std::size_t p = 0; p < want.size(); ++p)
      EXPECT_EQ(std::memcmp(got[r][p].data(), want[p].data(), want[p].size() * sizeof(float)), 0)
          << "rank " << r << " parameter " << p << " is not the furthest survivor's";
  }
}

TEST(Survivors, TakeTheStateOfTheOneThatGotFurthest) {
  reform_and_check({3, 2});  // rank 0 is ahead
  reform_and_check({2, 3});  // rank 1 is: the broadcast comes from it, not from rank 0
  reform_and_check({3, 3});  // level: nothing moves
}

TEST(Survivors, ReleasedTrainerKeepsItsStateAndLosesTheHooks) {
  train::TrainConfig cfg = ddp_config("mlp", "bucketed", 25);
  comm::MemoryStore store;
  run_threads(
      2,
      [&](int rank) {
        auto t = comm::connect_transport(store, rank, 2, {"release", 0, ""},
                                         comm::TransportKind::kTcp, std::chrono::seconds(20));
        train::DistributedTrainer dt(
            cfg, std::make_shared<comm::Communicator>(std::move(t), train::comm_options(cfg)));
        dt.step();
        const Params before = snapshot(dt.trainer().model());
        std::unique_ptr<train::Trainer> kept = dt.release_trainer();
        EXPECT_EQ(kept->steps_done(), 1);
        EXPECT_EQ(snapshot(kept->model()), before);
        // No DDP hook is left on the model: a step alone neither blocks on a
        // collective of the group it left nor crashes on its freed reducer.
        kept->set_world(0, 1, cfg);
        kept->step();
        EXPECT_EQ(kept->steps_done(), 2);
      },
      std::chrono::seconds(60));
}

std::shared_ptr<comm::ProcessGroup> tcp_group(comm::MemoryStore& store, int rank, int world,
                                              int attempt, const train::TrainConfig& cfg) {
  auto t = comm::connect_transport(store, rank, world, {"heal", attempt, ""},
                                   comm::TransportKind::kTcp, std::chrono::seconds(20), "127.0.0.1",
                                   "attempt" + std::to_string(attempt));
  return std::make_shared<comm::Communicator>(std::move(t), train::comm_options(cfg));
}

// Three ranks train 4 steps; rank 2's process is lost, and a newcomer (a
// Trainer built from the config, from_peers) takes its place next to the
// two survivors, which kept theirs. `torn`: rank 1's trainer lost its state
// too (a copy into it was cut short), so rank 0 alone is a source. After 4
// more steps every rank holds what 8 steps of an unbroken 3-rank job give.
std::vector<Params> heal_after_a_loss(const train::TrainConfig& cfg, bool torn) {
  comm::MemoryStore store;
  std::vector<Params> out(3);
  run_threads(
      3,
      [&](int rank) {
        std::unique_ptr<train::Trainer> kept;
        {
          train::DistributedTrainer before(cfg, tcp_group(store, rank, 3, 1, cfg));
          for (int s = 0; s < 4; ++s) before.step();
          if (rank < 2) kept = before.release_trainer();  // rank 2's state dies with it
        }
        if (torn && rank == 1) kept->set_holds_state(false);
        auto group = tcp_group(store, rank, 3, 2, cfg);
        std::optional<train::DistributedTrainer> after;
        if (kept) {
          kept->set_world(rank, 3, cfg);
          after.emplace(kept, group);
        } else {
          train::TrainConfig newcomer = cfg;
          newcomer.from_peers = true;
          after.emplace(newcomer, group);
        }
        EXPECT_EQ(after->trainer().steps_done(), 4) << "rank " << rank;
        EXPECT_TRUE(after->trainer().holds_state());
        for (int s = 0; s < 4; ++s) after->step();
        out[rank] = snapshot(after->trainer().model());
      },
      std::chrono::seconds(120));
  return out;
}

TEST(Survivors, NewcomerHealsFromLivePeersAndTheJobTrainsOnBitwise) {
  train::TrainConfig cfg = ddp_config("mlp", "bucketed", 25);
  cfg.optim = {.name = "adam", .lr = 1e-2f};
  const std::vector<Params> want = train_ranks(cfg, 3, comm::TransportKind::kTcp, 8);
  for (bool torn : {false, true}) {
    const std::vector<Params> got = heal_after_a_loss(cfg, torn);
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(got[r], want[r]) << "rank " << r << (torn ? ", rank 1 torn" : "")
                                 << ": not what an unbroken job holds after 8 steps";
  }
}

TEST(Survivors, AGroupWhereNoRankHoldsTheStateRefusesToTrain) {
  train::TrainConfig cfg = ddp_config("mlp", "bucketed", 25);
  cfg.from_peers = true;  // every rank a newcomer: the state is nowhere
  comm::MemoryStore store;
  run_threads(
      2,
      [&](int rank) {
        try {
          train::DistributedTrainer dt(cfg, tcp_group(store, rank, 2, 1, cfg));
          ADD_FAILURE() << "rank " << rank << " trained from a freshly built model";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("holds the training state"), std::string::npos)
              << e.what();
        }
      },
      std::chrono::seconds(60));
}

TEST(Survivors, AFailedReformHandsTheTrainerBack) {
  train::TrainConfig cfg = ddp_config("mlp", "bucketed", 25);
  comm::MemoryStore store;
  run_threads(
      2,
      [&](int rank) {
        std::unique_ptr<train::Trainer> kept = std::make_unique<train::Trainer>(cfg, rank, 2);
        kept->step();
        auto group = tcp_group(store, rank, 2, 1, cfg);
        group->abort("the attempt ended");  // the verdict came before the agreement
        EXPECT_ANY_THROW(train::DistributedTrainer(kept, group));
        ASSERT_TRUE(kept) << "rank " << rank << " lost the trainer it kept";
        EXPECT_EQ(kept->steps_done(), 1);
      },
      std::chrono::seconds(60));
}

}  // namespace
}  // namespace mddp::test

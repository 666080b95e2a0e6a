// Note [Survivors train on] (core/train/distributed.cc): ranks that outlived
// a failed one re-form a smaller group in their processes with the Trainers
// they kept. One survivor may be a step ahead (its step completed before the
// failure reached it); after the re-form every survivor holds the furthest
// one's parameters, optimiser state and step, bit for bit, whichever rank
// it has, and then they train on as one job.
#include <gtest/gtest.h>

#include <cstring>

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
        train::DistributedTrainer dt(std::move(kept[rank]), group);
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

}  // namespace
}  // namespace mddp::test

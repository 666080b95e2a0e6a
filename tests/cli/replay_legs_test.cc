// The legs of `run --replay` (cli/replay_legs.h) from a membership log: one
// per stretch of steps on one world size, the attempts that trained nothing
// left out, and a damaged log refused naming its line.
#include "cli/replay_legs.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/common/check.h"

namespace mddp::cli {
namespace {

std::filesystem::path write_log(const std::string& text) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("replay-legs-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "membership.jsonl") << text;
  return dir;
}

std::string line(int attempt, int64_t from, int world) {
  return "{\"attempt\":" + std::to_string(attempt) + ",\"from_step\":" + std::to_string(from) +
         ",\"world_size\":" + std::to_string(world) + ",\"how\":\"shrink\"}\n";
}

TEST(ReplayLegs, AStretchPerWorldSizeToTheNextChange) {
  const auto dir = write_log(line(0, 0, 3) + line(1, 21, 2) + line(2, 26, 3) + line(3, 61, 2));
  const std::vector<ReplayLeg> want = {{0, 21, 3}, {21, 26, 2}, {26, 61, 3}, {61, 0, 2}};
  EXPECT_EQ(replay_legs(dir), want);
  EXPECT_EQ(replay_legs(dir / "membership.jsonl"), want) << "the file itself does too";
}

TEST(ReplayLegs, NeighboursOfOneSizeMergeAndEmptyAttemptsDrop) {
  // A restart on the same size (from a checkpoint at 40, behind where it
  // died); an attempt that resumed where the next one did (it trained
  // nothing they kept); a size that returns.
  const auto dir =
      write_log(line(0, 0, 4) + line(1, 40, 4) + line(2, 55, 3) + line(3, 55, 2) + line(4, 90, 4));
  const std::vector<ReplayLeg> want = {{0, 55, 4}, {55, 90, 2}, {90, 0, 4}};
  EXPECT_EQ(replay_legs(dir), want);
}

TEST(ReplayLegs, ADamagedOrEmptyLogIsRefusedNamingTheLine) {
  const auto expect_refused = [](const std::string& text, const std::string& says) {
    try {
      replay_legs(write_log(text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_refused(line(0, 0, 3) + "{\"attempt\":1,\"from_step\":\"x\"}\n",
                 "membership.jsonl line 2: not a membership line");
  expect_refused(line(0, 0, 3) + "{torn", "line 2: not a membership line");
  expect_refused(line(0, 0, 0), "line 1: from_step 0, world_size 0");
  expect_refused("", "has no line: the run took no step");
  EXPECT_THROW(replay_legs("/nonexistent/run"), InputError);
}

}  // namespace
}  // namespace mddp::cli

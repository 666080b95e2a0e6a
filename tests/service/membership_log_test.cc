// The membership log (coordinator/membership_log.h): an attempt's line comes
// with its first training step, says from which step it trained, and who
// left and joined since the line before (a worker is its host and pid, so a
// survivor under a new rank neither left nor joined). An attempt that ended
// before its first step has no line.
#include "coordinator/membership_log.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/files.h"

namespace mddp::coordinator {
namespace {

namespace fs = std::filesystem;

Member member_of(int rank, int64_t pid) {
  Member m;
  m.rank = rank;
  m.host = "h";
  m.pid = pid;
  return m;
}

std::vector<int64_t> pids(const nlohmann::json& ranks) {
  std::vector<int64_t> out;
  for (const auto& r : ranks) out.push_back(r["pid"].get<int64_t>());
  return out;
}

TEST(MembershipLog, ALinePerAttemptThatTrainedWithWhoLeftAndJoined) {
  const fs::path dir = mddp::test::fresh_path("membership") / "run";
  {
    MembershipLog log(dir);
    log.formed(0, "start", {member_of(0, 10), member_of(1, 11), member_of(2, 12)}, 64, 1000);
    const auto first = log.trained(0, 1, 1500);
    ASSERT_TRUE(first);
    EXPECT_EQ((*first)["from_step"], 0);
    EXPECT_EQ((*first)["world_size"], 3);
    EXPECT_EQ((*first)["global_batch"], 64);
    EXPECT_EQ(pids((*first)["joined"]), (std::vector<int64_t>{10, 11, 12}));
    EXPECT_FALSE(log.trained(0, 2, 1600)) << "one line per attempt";

    // Rank 1 died; the survivors are ranks 0 and 1 now.
    log.formed(1, "shrink", {member_of(0, 10), member_of(1, 12)}, 64, 1000);
    EXPECT_FALSE(log.trained(0, 30, 1700)) << "a late record of the attempt before";
    // A newcomer joined before attempt 1 took a step: attempt 1 has no line.
    log.formed(2, "grow", {member_of(0, 10), member_of(1, 12), member_of(2, 13)}, 64, 1000);
    const auto grew = log.trained(2, 22, 3000000000);
    ASSERT_TRUE(grew);
    EXPECT_EQ((*grew)["from_step"], 21);
    EXPECT_DOUBLE_EQ((*grew)["to_first_step_s"].get<double>(), 2.999999);  // from 1000 ns
    EXPECT_EQ((*grew)["how"], "grow");
    EXPECT_EQ(pids((*grew)["left"]), (std::vector<int64_t>{11}));
    EXPECT_EQ(pids((*grew)["joined"]), (std::vector<int64_t>{13}));
    EXPECT_EQ((*grew)["joined"][0]["rank"], 2) << "the newcomer's rank in the new attempt";
    EXPECT_EQ(log.error(), "");
    EXPECT_EQ(log.lines().size(), 2u);
  }
  std::ifstream in(dir / "membership.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string s; std::getline(in, s);) lines.push_back(nlohmann::json::parse(s));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["attempt"], 0);
  EXPECT_EQ(lines[1]["attempt"], 2);
  fs::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace mddp::coordinator

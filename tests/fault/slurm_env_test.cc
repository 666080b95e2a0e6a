// worker/slurm_env.h: SLURM's node-list syntax expanded by hand (checked
// against the expansions `scontrol show hostnames` documents), and the task
// read from srun's variables, with one clear error for each malformed one.
#include "worker/slurm_env.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/common/check.h"

namespace mddp::worker {
namespace {

using Names = std::vector<std::string>;

TEST(ExpandNodelist, PlainNamesAndRangesWithTheirPadding) {
  EXPECT_EQ(expand_nodelist("node7"), Names{"node7"});
  EXPECT_EQ(expand_nodelist("node[01-03,07]"), (Names{"node01", "node02", "node03", "node07"}));
  EXPECT_EQ(expand_nodelist("n[8-11]"), (Names{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_nodelist("n[08-11]"), (Names{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand_nodelist("gpu[1-2],login,cpu[003]"), (Names{"gpu1", "gpu2", "login", "cpu003"}));
  EXPECT_EQ(expand_nodelist("127.0.0.[1-2]"), (Names{"127.0.0.1", "127.0.0.2"}));
}

TEST(ExpandNodelist, SeveralBracketsInOneNameGiveEveryCombination) {
  EXPECT_EQ(expand_nodelist("r[1-2]-n[1,3]"), (Names{"r1-n1", "r1-n3", "r2-n1", "r2-n3"}));
  EXPECT_EQ(expand_nodelist("a[1-2]b.ib"), (Names{"a1b.ib", "a2b.ib"}));
}

TEST(ExpandNodelist, MalformedListsAreInputErrorsQuotingTheList) {
  for (const char* bad : {"", "node[1-3", "node]1[", "node[]", "node[3-1]", "node[a-b]", "a,,b",
                          "node[1-2]]", "n[[1]]", "n[1-2000000]"}) {
    try {
      expand_nodelist(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(str("SLURM_JOB_NODELIST='", bad, "'")),
                std::string::npos)
          << e.what();
    }
  }
}

// Sets srun's variables for one test and removes them after.
class SlurmVars : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v :
         {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_NODELIST", "RANK"})
      ::unsetenv(v);
  }
  static void set(const char* var, const char* value) { ::setenv(var, value, 1); }
};

TEST_F(SlurmVars, NoProcidIsNotAnSrunTask) {
  EXPECT_FALSE(slurm_task().has_value());
}

TEST_F(SlurmVars, ReadsTheTask) {
  set("SLURM_PROCID", "5");
  set("SLURM_LOCALID", "1");
  set("SLURM_NTASKS", "8");
  set("SLURM_JOB_NODELIST", "node[01-04]");
  const auto t = slurm_task();
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->rank, 5);
  EXPECT_EQ(t->local_rank, 1);
  EXPECT_EQ(t->ntasks, 8);
  EXPECT_EQ(t->nodes, (Names{"node01", "node02", "node03", "node04"}));
}

// `microddp run --nproc 4` inside a batch script: its workers inherit the
// batch step's SLURM_PROCID=0 and SLURM_NTASKS=8, but their rank is run's
// RANK, and the job's world size is run's, not the allocation's.
TEST_F(SlurmVars, AnotherLaunchersRankWins) {
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "8");
  set("SLURM_JOB_NODELIST", "node[01-04]");
  set("RANK", "3");
  EXPECT_FALSE(slurm_task().has_value());
}

TEST_F(SlurmVars, DisagreeingOrMalformedVariablesAreNamed) {
  const auto error_of = [] {
    try {
      slurm_task();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  set("SLURM_PROCID", "0");
  EXPECT_NE(error_of().find("SLURM_NTASKS is not"), std::string::npos);
  set("SLURM_NTASKS", "2");
  set("SLURM_PROCID", "2");
  EXPECT_NE(error_of().find("SLURM_PROCID=2 is not a task of SLURM_NTASKS=2"), std::string::npos);
  set("SLURM_PROCID", "x1");
  EXPECT_NE(error_of().find("SLURM_PROCID='x1' is not a number"), std::string::npos);
  set("SLURM_PROCID", "1");
  set("SLURM_JOB_NODELIST", "n[1-");
  EXPECT_NE(error_of().find("SLURM_JOB_NODELIST='n[1-'"), std::string::npos);
}

}  // namespace
}  // namespace mddp::worker

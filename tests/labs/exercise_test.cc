// Every Lab's checker fails on the exercise as shipped (labs/*/exercise.cc:
// this binary's linked_implementations()), saying which function is still
// to be written and where.
#include <gtest/gtest.h>

#include "tests/labs/check_helpers.h"

namespace mddp::labs::test {
namespace {

struct Untouched {
  std::string lab, file, function;  // the first function the checker calls, and its file
};

void PrintTo(const Untouched& u, std::ostream* os) {
  *os << u.lab;
}

class Exercise : public ::testing::TestWithParam<Untouched> {};

TEST_P(Exercise, FailsNamingTheTodo) {
  const Report r = run_check(GetParam().lab, linked_implementations());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.failure().find("not written yet: " + GetParam().file + ":"), std::string::npos)
      << r.failure();
  EXPECT_NE(r.failure().find(GetParam().function + "() still has its TODO"), std::string::npos)
      << r.failure();
}

INSTANTIATE_TEST_SUITE_P(
    Labs, Exercise,
    ::testing::Values(
        Untouched{"manual", "labs/01_manual/exercise.cc", "average_gradients"},
        Untouched{"naive_allreduce", "labs/02_naive_allreduce/exercise.cc", "all_reduce_naive"},
        Untouched{"ring_allreduce", "labs/03_ring_allreduce/exercise.cc", "ring_reduce_scatter"},
        Untouched{"tree_allreduce", "labs/04_tree_allreduce/exercise.cc", "tree_reduce"},
        Untouched{"naive_dp", "labs/05_naive_dp/exercise.cc", "NaiveSync::finish"},
        Untouched{"hooks", "labs/06_hooks/exercise.cc", "HookedSync::on_grad_ready"},
        Untouched{"bucketing", "labs/07_bucketing/exercise.cc", "assign_buckets"},
        Untouched{"ddp", "labs/08_ddp/exercise.cc", "Ddp::Ddp"},
        Untouched{"sync_primitives", "labs/09_sync_primitives/exercise.cc", "broadcast_model"},
        Untouched{"tied_weight", "labs/11_tied_weight/exercise.cc", "count_contribution"}),
    [](const ::testing::TestParamInfo<Untouched>& info) { return info.param.lab; });

}  // namespace
}  // namespace mddp::labs::test

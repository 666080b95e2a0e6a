// count_contribution (Note [Contributions]): a parameter used k times is
// counted off its bucket at its k-th contribution only, and a bucket is
// complete when its last parameter is.
#include "core/ddp/contributions.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "core/nn/module.h"

namespace mddp::ddp {
namespace {

// The GPT's shape in miniature: parameter 0 (tied, uses 2) shares bucket 1
// with parameter 1; parameter 2 is bucket 0. Backward: 0 (the head), 2, 1, 0.
TEST(CountContribution, TheTiedWeightsBucketWaitsForItsSecondContribution) {
  std::vector<int> uses_left{2, 1, 1};
  std::vector<std::size_t> pending{1, 2};
  EXPECT_FALSE(count_contribution(uses_left, pending, 0, 1));  // the head's share
  EXPECT_EQ(uses_left, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(pending, (std::vector<std::size_t>{1, 2})) << "not final yet: the bucket still waits";
  EXPECT_TRUE(count_contribution(uses_left, pending, 2, 0));
  EXPECT_FALSE(count_contribution(uses_left, pending, 1, 1));
  EXPECT_EQ(pending, (std::vector<std::size_t>{0, 1})) << "one parameter in, the tied one not";
  EXPECT_TRUE(count_contribution(uses_left, pending, 0, 1));  // the embedding's share: complete
  EXPECT_EQ(uses_left, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(pending, (std::vector<std::size_t>{0, 0}));
}

TEST(CountContribution, AParameterUsedThreeTimesCompletesItsBucketAtTheThird) {
  std::vector<int> uses_left{3};
  std::vector<std::size_t> pending{1};
  EXPECT_FALSE(count_contribution(uses_left, pending, 0, 0));
  EXPECT_FALSE(count_contribution(uses_left, pending, 0, 0));
  EXPECT_EQ(pending[0], 1u);
  EXPECT_TRUE(count_contribution(uses_left, pending, 0, 0));
}

TEST(UsesOf, TakesEachParametersUsesAndRefusesFewerThanOne) {
  nn::Parameter a, b;
  a.name = "a";
  b.name = "b";
  b.uses = 2;
  EXPECT_EQ(uses_of({&a, &b}), (std::vector<int>{1, 2}));
  b.uses = 0;
  EXPECT_THROW(uses_of({&a, &b}), std::logic_error);  // MDDP_CHECK
}

}  // namespace
}  // namespace mddp::ddp

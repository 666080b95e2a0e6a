// Every Lab's checker passes on the reference solutions (labs/*/solution.cc:
// this binary's linked_implementations()), and names each classic student
// bug planted in bugs/ with the message a student can act on.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/labs/bugs/bugs.h"
#include "tests/labs/check_helpers.h"

namespace mddp::labs::test {
namespace {

class ReferenceSolution : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceSolution, Passes) {
  const Report r = run_check(GetParam(), linked_implementations());
  EXPECT_TRUE(r.ok()) << r.failure();
}

// Lab 10 (answers, not code) has its own tests: performance_lab_test.cc.
INSTANTIATE_TEST_SUITE_P(Labs, ReferenceSolution,
                         ::testing::Values("manual", "naive_allreduce", "ring_allreduce",
                                           "tree_allreduce", "naive_dp", "hooks", "bucketing",
                                           "ddp", "sync_primitives", "tied_weight"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// The speed comparison runs (it has no threshold: it only has to measure).
TEST(ReferenceSolution, RingWithTheSpeedComparison) {
  CheckOptions o = options();
  o.world_sizes = {2};
  o.transports = {comm::TransportKind::kShm};
  o.speed_ranks = 2;
  const Report r = run_check("ring_allreduce", linked_implementations(), o);
  ASSERT_TRUE(r.ok()) << r.failure();
  std::string lines;
  for (const auto& l : r.lines()) lines += l + "\n";
  EXPECT_NE(lines.find("alpha-beta ring"), std::string::npos) << lines;
  EXPECT_NE(lines.find("fitted to the reference's times"), std::string::npos) << lines;
}

// A bug, the Lab it belongs to, and what its message must say.
struct Planted {
  std::string name, lab;
  void (*plant)(Implementations&);
  std::vector<std::string> says;
};

void PrintTo(const Planted& p, std::ostream* os) {
  *os << p.name;
}

class PlantedBug : public ::testing::TestWithParam<Planted> {};

TEST_P(PlantedBug, IsNamed) {
  Implementations impl = linked_implementations();
  GetParam().plant(impl);
  const Report r = run_check(GetParam().lab, impl);
  ASSERT_FALSE(r.ok()) << GetParam().name << " passed the checker";
  std::printf("%s\n", r.failure().c_str());  // what the student reads
  for (const auto& s : GetParam().says)
    EXPECT_NE(r.failure().find(s), std::string::npos) << "missing '" << s << "' in:\n"
                                                      << r.failure();
}

INSTANTIATE_TEST_SUITE_P(
    Labs, PlantedBug,
    ::testing::Values(
        Planted{
            "ring_off_by_one",
            "ring_allreduce",
            [](Implementations& i) {
              i.ring.reduce_scatter = bugs::ring_off_by_one::ring_reduce_scatter;
            },
            {"reduce-scatter step 0: rank 0 sent block 0", "ring off by one block", "expected"}},
        Planted{"ring_no_accumulate",
                "ring_allreduce",
                [](Implementations& i) {
                  i.ring.reduce_scatter = bugs::ring_no_accumulate::ring_reduce_scatter;
                },
                {"reduce-scatter step 1", "it sent its own input"}},
        Planted{"tree_wrong_parent",
                "tree_allreduce",
                [](Implementations& i) { i.tree.reduce = bugs::tree_wrong_parent::tree_reduce; },
                {"tree reduce (root 0)", "did not send to its parent"}},
        Planted{"naive_early_result",
                "naive_allreduce",
                [](Implementations& i) {
                  i.naive_allreduce = bugs::naive_early_result::all_reduce_naive;
                },
                {"rank 0 sent out a result holding the contributions of ranks {0} only"}},
        Planted{"manual_only_first",
                "manual",
                [](Implementations& i) {
                  i.manual.average_gradients = bugs::manual_only_first::average_gradients;
                },
                {"average of 2 replicas: replica 1", "replica 1's own gradient"}},
        Planted{
            "naive_dp_average_twice",
            "naive_dp",
            [](Implementations& i) { i.naive_dp = bugs::naive_dp_average_twice::make_naive_sync; },
            {"averaging twice"}},
        Planted{"naive_dp_sum_only",
                "naive_dp",
                [](Implementations& i) { i.naive_dp = bugs::naive_dp_sum_only::make_naive_sync; },
                {"never divided by the world size"}},
        Planted{"hooks_wait_in_hook",
                "hooks",
                [](Implementations& i) { i.hooks = bugs::hooks_wait_in_hook::make_hooked_sync; },
                {"waited for inside on_grad_ready"}},
        Planted{"flush_out_of_order",
                "bucketing",
                [](Implementations& i) {
                  i.bucketing.flush = bugs::flush_out_of_order::flush_in_order;
                },
                {"buckets flushed out of order"}},
        Planted{"assign_cap_off_by_one",
                "bucketing",
                [](Implementations& i) {
                  i.bucketing.assign = bugs::assign_cap_off_by_one::assign_buckets;
                },
                {"still fits bucket"}},
        Planted{"ddp_no_broadcast",
                "ddp",
                [](Implementations& i) { i.ddp = bugs::ddp_no_broadcast::make_ddp; },
                {"after construction: expected rank 0's", "the initial broadcast is missing"}},
        Planted{"ddp_always_sync",
                "ddp",
                [](Implementations& i) { i.ddp = bugs::ddp_always_sync::make_ddp; },
                {"during micro-batch 1 of 3", "no_sync"}},
        Planted{"gather_mean_of_accuracies",
                "sync_primitives",
                [](Implementations& i) {
                  i.primitives.gather_eval = bugs::gather_mean_of_accuracies::gather_eval;
                },
                {"mean of the ranks' accuracies"}},
        Planted{"save_without_barrier",
                "sync_primitives",
                [](Implementations& i) {
                  i.primitives.save_on_root = bugs::save_without_barrier::save_on_root;
                },
                {"before the root's save() had finished", "barrier"}},
        Planted{
            "tied_count_firings",
            "tied_weight",
            [](Implementations& i) {
              i.tied_weight = bugs::tied_count_firings::count_contribution;
            },
            {"backward 1: the tied weight's bucket",
             "was launched after 1 of its 2 contributions: its gradient misses the embedding"}}),
    [](const ::testing::TestParamInfo<Planted>& info) { return info.param.name; });

}  // namespace
}  // namespace mddp::labs::test

// all_reduce: every algorithm x op x dtype x count, on every transport and
// world size, against the exactly computed reference (harness.h).
#include "core/comm/algorithms/context.h"
#include "tests/multirank/harness.h"

namespace mddp::comm::test {
namespace {

class AllReduceTest : public ::testing::TestWithParam<WorldParam> {};

TEST_P(AllReduceTest, EveryAlgorithmOpDtypeAndCount) {
  const auto [kind, n] = GetParam();
  with_comms(kind, n, [&](Communicator& comm) {
    for (auto algo : {Algorithm::kRing, Algorithm::kNaive, Algorithm::kTree, Algorithm::kAuto})
      for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin})
        for (auto t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16})
          for (int64_t count : sweep_counts(n)) {
            SCOPED_TRACE(str("rank ", comm.rank(), " ", to_string(algo), " ", to_string(op), " ",
                             to_string(t), " count ", count));
            Buffer buf = make_input(t, count, comm.rank());
            comm.all_reduce(buf.data(), count, t, op, algo)->wait();
            ASSERT_TRUE(matches(buf, 0, count, [&](int64_t i) { return expected_value(t, op, n, i); }));
          }
  });
}

// Blocks that span several ring segments, where block 0 has one segment more
// than the others (count = n * 2 segments + 1): the uneven send/receive
// segment counts of one ring step.
TEST_P(AllReduceTest, RingSegmentBoundaries) {
  const auto [kind, n] = GetParam();
  with_comms(kind, n, [&](Communicator& comm) {
    for (auto t : {DataType::kFloat32, DataType::kBFloat16}) {
      const auto seg = static_cast<int64_t>(kSegmentBytes / element_size(t));
      for (int64_t count : {int64_t{n} * 2 * seg + 1, int64_t{n} * seg - 1}) {
        SCOPED_TRACE(str("rank ", comm.rank(), " ", to_string(t), " count ", count));
        Buffer buf = make_input(t, count, comm.rank());
        comm.all_reduce(buf.data(), count, t, ReduceOp::kSum, Algorithm::kRing)->wait();
        ASSERT_TRUE(matches(buf, 0, count,
                            [&](int64_t i) { return expected_value(t, ReduceOp::kSum, n, i); }));
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllReduceTest, ::testing::ValuesIn(all_worlds()), world_name);

}  // namespace
}  // namespace mddp::comm::test

// all_reduce: every algorithm x op x dtype x count, on every transport and
// world size, against the exactly computed reference (harness.h).
#include <cmath>

#include "core/comm/algorithms/context.h"
#include "core/comm/reduce_kernels.h"
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
            ASSERT_TRUE(matches(buf, 0, count, Expected(t, op, n)));
          }
  });
}

// Blocks that span several ring segments, where block 0 has one segment more
// than the others (count = n * 2 segments + 1): the uneven send/receive
// segment counts of one ring step. Two and three ranks cover both shapes of
// the ring (one neighbour on both sides, and distinct neighbours).
TEST(AllReduceRingSegments, UnevenSegmentCounts) {
  for (auto kind : {TransportKind::kTcp, TransportKind::kShm})
    for (int n : {2, 3})
      with_comms(kind, n, [&](Communicator& comm) {
        for (auto t : {DataType::kFloat32, DataType::kBFloat16}) {
          const auto seg = static_cast<int64_t>(kSegmentBytes / element_size(t));
          for (int64_t count : {int64_t{n} * 2 * seg + 1, int64_t{n} * seg - 1}) {
            SCOPED_TRACE(str(to_string(kind), " rank ", comm.rank(), " of ", n, " ", to_string(t),
                             " count ", count));
            Buffer buf = make_input(t, count, comm.rank());
            comm.all_reduce(buf.data(), count, t, ReduceOp::kSum, Algorithm::kRing)->wait();
            ASSERT_TRUE(matches(buf, 0, count, Expected(t, ReduceOp::kSum, n)));
          }
        }
      });
}

// Non-integer 16-bit inputs: every partial sum is rounded to the wire type,
// so results are compared with the exact sum (in double, of the 16-bit
// inputs) within the bound stated in reduce_kernels.h: n * u * sum |x_i|.
// One transport: this checks arithmetic, not the wire.
TEST(AllReduceSixteenBit, WithinStatedTolerance) {
  for (int n : {3, 8}) {
    const TransportKind kind = TransportKind::kShm;
    const int64_t count = 20011;
    auto value = [](int rank, int64_t i) {
      return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank)) * 3.0f;
    };
    with_comms(kind, n, [&](Communicator& comm) {
      for (auto algo : {Algorithm::kRing, Algorithm::kNaive, Algorithm::kTree})
        for (auto t : {DataType::kFloat16, DataType::kBFloat16})
          for (auto op : {ReduceOp::kSum, ReduceOp::kAvg}) {
            Buffer buf(t, count);
            for (int64_t i = 0; i < count; ++i) buf.set(i, value(comm.rank(), i));
            comm.all_reduce(buf.data(), count, t, op, algo)->wait();
            double worst = 0;
            for (int64_t i = 0; i < count; ++i) {
              double exact = 0, magnitude = 0;
              for (int q = 0; q < n; ++q) {
                const double x = round_to(t, value(q, i));
                exact += x;
                magnitude += std::fabs(x);
              }
              if (op == ReduceOp::kAvg) exact /= n, magnitude /= n;
              const double err = std::fabs(buf.get(i) - exact);
              const double bound = n * unit_roundoff(t) * magnitude + 1e-7;
              worst = std::max(worst, err / bound);
              ASSERT_LE(err, bound)
                  << to_string(algo) << " " << to_string(t) << " " << to_string(op) << " [" << i
                  << "] got " << buf.get(i) << " exact " << exact;
            }
            EXPECT_GT(worst, 0.0) << "no rounding at all: the test is not testing 16-bit";
          }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllReduceTest, ::testing::ValuesIn(all_worlds()), world_name);

}  // namespace
}  // namespace mddp::comm::test

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
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().world;
  with_comms(kind, n, [&](Communicator& comm) {
    for (auto algo : {Algorithm::kRing, Algorithm::kNaive, Algorithm::kTree, Algorithm::kDoubling,
                      Algorithm::kAuto})
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
      for (auto algo :
           {Algorithm::kRing, Algorithm::kNaive, Algorithm::kTree, Algorithm::kDoubling})
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

// Recursive doubling on every world size to 8: the powers of two, and the
// others whose first 2(n - 2^k) ranks fold into pairs. Non-integer inputs
// with signed zeros and NaNs whose payloads name the rank: the two ends of
// an exchange combine in rank order, so every rank ends with the same bits
// (max(+0, -0) and max(-0, +0) differ in sign; a NaN sum keeps the first
// payload); the other elements are within the stated tolerance of the
// exact reduction (reduce_kernels.h), and max/min exact.
TEST(AllReduceDoubling, EveryWorldSizeEndsWithTheSameBitsOnEveryRank) {
  constexpr int64_t kCount = 1001;  // odd, and not a multiple of any n here
  constexpr int64_t kSpecial = 10;  // every 10th element a signed zero, the next a NaN
  auto value = [](int rank, int64_t i) {
    if (i % kSpecial == 0) return rank % 2 ? 0.0f : -0.0f;
    return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank)) * 3.0f;
  };
  // Element i of b: a quiet NaN with the rank in its payload, written raw (set() would round it).
  auto set_nan = [](Buffer& b, int64_t i, int rank) {
    const auto payload = static_cast<uint16_t>(rank + 1);
    uint8_t* p = b.bytes().data() + i * element_size(b.dtype());
    if (b.dtype() == DataType::kFloat32) {
      const uint32_t bits = 0x7fc00000u | payload;
      std::memcpy(p, &bits, 4);
    } else {
      const auto bits =
          static_cast<uint16_t>((b.dtype() == DataType::kFloat16 ? 0x7e00u : 0x7fc0u) | payload);
      std::memcpy(p, &bits, 2);
    }
  };
  const std::vector<DataType> types{DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
  const std::vector<ReduceOp> ops{ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};
  for (int n = 2; n <= 8; ++n) {
    using Bits = std::vector<uint8_t>;
    std::vector<std::vector<Bits>> results(types.size() * ops.size(),
                                           std::vector<Bits>(n));  // [case][rank]
    with_comms(TransportKind::kShm, n, [&](Communicator& comm) {
      std::size_t c = 0;  // the case: (t, op)
      for (DataType t : types)
        for (ReduceOp op : ops) {
          SCOPED_TRACE(str(n, " ranks, rank ", comm.rank(), " ", to_string(t), " ", to_string(op)));
          Buffer buf(t, kCount);
          for (int64_t i = 0; i < kCount; ++i) buf.set(i, value(comm.rank(), i));
          for (int64_t i = 1; i < kCount; i += kSpecial) set_nan(buf, i, comm.rank());
          comm.all_reduce(buf.data(), kCount, t, op, Algorithm::kDoubling)->wait();
          results[c++][comm.rank()] = buf.bytes();
          for (int64_t i = 0; i < kCount; ++i) {
            const float got = buf.get(i);
            if (i % kSpecial ==
                1) {  // NaN: a sum stays NaN; max/min's NaN propagation is unspecified
              if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
                ASSERT_TRUE(std::isnan(got)) << i;
              }
              continue;
            }
            double exact = 0, magnitude = 0, extreme = round_to(t, value(0, i));
            for (int q = 0; q < n; ++q) {
              const double x = round_to(t, value(q, i));
              exact += x;
              magnitude += std::fabs(x);
              extreme = op == ReduceOp::kMax ? std::max(extreme, x) : std::min(extreme, x);
            }
            if (op == ReduceOp::kMax || op == ReduceOp::kMin) {
              ASSERT_EQ(got, extreme) << "[" << i << "]";
              continue;
            }
            if (op == ReduceOp::kAvg) exact /= n, magnitude /= n;
            ASSERT_LE(std::fabs(got - exact), n * unit_roundoff(t) * magnitude + 1e-7)
                << "[" << i << "] got " << got;
          }
        }
    });
    for (std::size_t c = 0; c < results.size(); ++c)
      for (int q = 1; q < n; ++q)
        ASSERT_EQ(results[c][q], results[c][0])
            << n << " ranks, " << to_string(types[c / ops.size()]) << " "
            << to_string(ops[c % ops.size()]) << ": rank " << q
            << " ended with other bits than rank 0";
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllReduceTest, ::testing::ValuesIn(all_worlds()), world_name);

}  // namespace
}  // namespace mddp::comm::test

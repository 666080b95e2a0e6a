// Asynchrony and bookkeeping: collectives issued back to back before any
// wait all complete, in issue order, with the right results; history()
// records op, sequence number, bytes and times, keeps the last 32; kAuto and
// CommOptions::algorithm resolve as documented.
#include "core/comm/algorithms/algorithms.h"
#include "tests/multirank/harness.h"

namespace mddp::comm::test {
namespace {

class AsyncTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(AsyncTest, IssuedBeforeWaitingCompleteInOrder) {
  const int n = 4;
  with_comms(GetParam(), n, [&](Communicator& comm) {
    const int r = comm.rank();
    constexpr int kOps = 12;
    const int64_t count = 5003;
    std::vector<Buffer> bufs;
    for (int k = 0; k < kOps; ++k) bufs.push_back(make_input(DataType::kFloat32, count, r));
    float token = r == 2 ? 42.0f : 0.0f;
    std::vector<WorkPtr> works;
    const Algorithm algos[] = {Algorithm::kRing, Algorithm::kTree, Algorithm::kNaive,
                               Algorithm::kDoubling};
    for (int k = 0; k < kOps; ++k) {
      works.push_back(
          comm.all_reduce(bufs[k].data(), count, DataType::kFloat32, ReduceOp::kSum, algos[k % 4]));
      if (k == kOps / 2) works.push_back(comm.broadcast(&token, 1, DataType::kFloat32, 2));
    }
    works.push_back(comm.barrier());
    // Wait newest first: the last one done implies all earlier ones are.
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
    for (auto& w : works) EXPECT_TRUE(w->completed());
    for (std::size_t k = 1; k < works.size(); ++k) {
      EXPECT_GT(works[k - 1]->end_ns(), 0);
      EXPECT_LE(works[k - 1]->end_ns(), works[k]->start_ns())
          << "work " << k << " started before its predecessor ended";
    }
    for (int k = 0; k < kOps; ++k)
      ASSERT_TRUE(matches(bufs[k], 0, count, Expected(DataType::kFloat32, ReduceOp::kSum, n)))
          << "all_reduce " << k;
    EXPECT_EQ(token, 42.0f);
  });
}

TEST_P(AsyncTest, HistoryRecordsTheLastCollectives) {
  const int n = 2;
  with_comms(GetParam(), n, [&](Communicator& comm) {
    std::vector<float> data(256, 1.0f);
    comm.all_reduce(data.data(), 256, DataType::kFloat32, ReduceOp::kSum, Algorithm::kTree)->wait();
    comm.broadcast(data.data(), 10, DataType::kFloat32, 1)->wait();
    comm.barrier()->wait();
    auto h = comm.history();
    ASSERT_EQ(h.size(), 3u);
    EXPECT_EQ(h[0].seq, 1u);
    EXPECT_EQ(h[0].op, "all_reduce(tree)");
    EXPECT_EQ(h[0].bytes, 1024u);
    EXPECT_EQ(h[1].op, "broadcast(root 1)");
    EXPECT_EQ(h[1].bytes, 40u);
    EXPECT_EQ(h[2].op, "barrier");
    EXPECT_EQ(h[2].seq, 3u);
    for (const auto& rec : h) {
      EXPECT_GT(rec.start_ns, 0) << rec.op;
      EXPECT_GE(rec.end_ns, rec.start_ns) << rec.op;
    }
    // Only the last 32 are kept.
    for (int k = 0; k < 40; ++k)
      comm.all_reduce(data.data(), 1, DataType::kFloat32, ReduceOp::kMax);
    comm.barrier()->wait();
    h = comm.history();
    ASSERT_EQ(h.size(), 32u);
    EXPECT_EQ(h.front().seq, 44u - 31u);
    EXPECT_EQ(h.back().seq, 44u);
  });
}

// kAuto on the call means CommOptions::algorithm; kAuto there means
// choose_all_reduce_algorithm. Both visible in the history.
TEST_P(AsyncTest, AlgorithmSelection) {
  with_comms(
      GetParam(), 2,
      [&](Communicator& comm) {
        float x = 1;
        comm.all_reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum)->wait();
        comm.all_reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum, Algorithm::kTree)->wait();
        EXPECT_EQ(comm.history()[0].op, "all_reduce(naive)");
        EXPECT_EQ(comm.history()[1].op, "all_reduce(tree)");
        EXPECT_EQ(x, 4.0f);
      },
      CommOptions{Algorithm::kNaive, 20s});
  with_comms(GetParam(), 8, [&](Communicator& comm) {
    std::vector<float> big(1 << 20, 1.0f);
    comm.all_reduce(big.data(), 1, DataType::kFloat32, ReduceOp::kSum)->wait();
    comm.all_reduce(big.data(), 1 << 20, DataType::kFloat32, ReduceOp::kSum)->wait();
    EXPECT_EQ(comm.history()[0].op,
              str("all_reduce(", to_string(choose_all_reduce_algorithm(4, 8)), ")"));
    EXPECT_EQ(comm.history()[1].op, "all_reduce(ring)");
  });
}

// The rule itself (auto_select.cc), in the properties that hold whatever
// its measured constants: one rank takes the ring (nothing moves); tiny
// messages go by recursive doubling on any world, large ones by the ring;
// as the size grows the choice only moves doubling -> tree -> ring, never
// back; the tree never wins on <= 3 ranks (as many steps as the ring, more
// bytes) but still has a band on many ranks, above the doubling cap.
TEST(AutoSelectTest, FollowsTheAlphaBetaModel) {
  EXPECT_EQ(choose_all_reduce_algorithm(4, 1), Algorithm::kRing);
  const auto rank_of = [](Algorithm a) {
    return a == Algorithm::kDoubling ? 0 : a == Algorithm::kTree ? 1 : 2;
  };
  for (int n : {2, 3, 4, 5, 6, 7, 8, 16, 64}) {
    EXPECT_EQ(choose_all_reduce_algorithm(4, n), Algorithm::kDoubling) << n;
    EXPECT_EQ(choose_all_reduce_algorithm(64 << 20, n), Algorithm::kRing) << n;
    Algorithm before = Algorithm::kDoubling;
    for (std::size_t bytes = 4; bytes <= (64u << 20); bytes += bytes / 8 + 4) {
      const Algorithm a = choose_all_reduce_algorithm(bytes, n);
      EXPECT_GE(rank_of(a), rank_of(before))
          << n << " ranks, " << bytes << " bytes: " << to_string(a) << " after "
          << to_string(before);
      if (n <= 3) {
        EXPECT_NE(a, Algorithm::kTree) << n << " ranks, " << bytes << " bytes";
      }
      before = a;
    }
  }
  bool tree = false;
  for (std::size_t bytes = 4; bytes <= (1u << 20); bytes *= 2)
    tree = tree || choose_all_reduce_algorithm(bytes, 64) == Algorithm::kTree;
  EXPECT_TRUE(tree) << "64 ranks: the tree never chosen";
}

INSTANTIATE_TEST_SUITE_P(Transports, AsyncTest,
                         ::testing::Values(TransportKind::kTcp, TransportKind::kShm),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace mddp::comm::test

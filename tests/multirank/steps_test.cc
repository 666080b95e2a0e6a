// The steps a Communicator records for each collective (Work::steps(), and
// the step observer) against each algorithm's spec, stated here
// independently: the ring's 2(n-1) steps with their blocks and neighbours,
// the trees' rounds with parents and children, the naive algorithm's
// messages through rank 0, recursive doubling's partners.
#include <map>
#include <mutex>

#include "tests/multirank/harness.h"

namespace mddp::comm::test {
namespace {

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

class StepsTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(StepsTest, RingStepsFollowTheSchedule) {
  for (int n : {2, 3, 4}) {
    with_comms(GetParam(), n, [&](Communicator& c) {
      const int r = c.rank();
      std::vector<float> data(10, 1.0f);
      auto work =
          c.all_reduce(data.data(), 10, DataType::kFloat32, ReduceOp::kSum, Algorithm::kRing);
      work->wait();
      const auto& steps = work->steps();
      ASSERT_EQ(steps.size(), 2u * (n - 1)) << "rank " << r;
      const auto block_bytes = [&](int b) {
        return 4 * (10 / n + (b < 10 % n ? 1 : 0));
      };  // balanced blocks
      for (int k = 0; k < 2 * (n - 1); ++k) {
        const AlgoStep& s = steps[k];
        const bool rs = k < n - 1;
        const int i = rs ? k : k - (n - 1);
        EXPECT_EQ(s.phase, rs ? StepPhase::kReduceScatter : StepPhase::kAllGather);
        EXPECT_EQ(s.index, i);
        EXPECT_EQ(s.send_peer, mod(r + 1, n));
        EXPECT_EQ(s.recv_peer, mod(r - 1, n));
        EXPECT_EQ(s.send_block, rs ? mod(r - i - 1, n) : mod(r - i, n))
            << "rank " << r << " step " << k;
        EXPECT_EQ(s.recv_block, rs ? mod(r - i - 2, n) : mod(r - i - 1, n))
            << "rank " << r << " step " << k;
        EXPECT_EQ(s.send_bytes, block_bytes(s.send_block));
        EXPECT_EQ(s.recv_bytes, block_bytes(s.recv_block));
        EXPECT_LE(work->start_ns(), s.start_ns);
        EXPECT_LE(s.start_ns, s.end_ns);
        EXPECT_LE(s.end_ns, work->end_ns());
        if (k > 0) {
          EXPECT_LE(steps[k - 1].end_ns, s.start_ns);
        }
      }
    });
  }
}

// Rank r's partial sums after each step, as the observer saw them: in the
// reduce-scatter, the block received in step s holds s + 2 ranks' inputs.
TEST_P(StepsTest, TheObserverSeesThePartialSums) {
  const int n = 4;
  with_comms(GetParam(), n, [&](Communicator& c) {
    const int r = c.rank();
    std::vector<std::pair<AlgoStep, float>>
        seen;  // each step, and the first element of its received block
    std::mutex mu;
    c.set_step_observer([&](const AlgoStep& s, const void* data) {
      std::lock_guard lock(mu);
      seen.emplace_back(s, static_cast<const float*>(data)[s.recv_block]);  // one element per block
    });
    std::vector<float> data(n);
    for (int i = 0; i < n; ++i)
      data[i] = static_cast<float>(1 << r);  // the sum of a set of ranks is its bitmask
    c.all_reduce(data.data(), n, DataType::kFloat32, ReduceOp::kSum, Algorithm::kRing)->wait();
    std::lock_guard lock(mu);
    ASSERT_EQ(seen.size(), 2u * (n - 1));
    for (int s = 0; s < n - 1; ++s) {
      uint32_t want = 0;  // ranks r-s-1 .. r: the block came s+1 hops to us, then we added ours
      for (int k = 0; k <= s + 1; ++k) want |= 1u << mod(r - k, n);
      EXPECT_EQ(static_cast<uint32_t>(seen[s].second), want) << "rank " << r << " step " << s;
    }
    for (int s = n - 1; s < 2 * (n - 1); ++s)
      EXPECT_EQ(seen[s].second, static_cast<float>((1 << n) - 1));
  });
}

TEST_P(StepsTest, TreeRoundsGoThroughParentsAndChildren) {
  const int n = 5;  // vranks 0..4: 1->0, 3->2, 2->0, 4->0 in the reduce
  with_comms(GetParam(), n, [&](Communicator& c) {
    const int r = c.rank();
    std::vector<float> data(3, 1.0f);
    auto work = c.all_reduce(data.data(), 3, DataType::kFloat32, ReduceOp::kSum, Algorithm::kTree);
    work->wait();
    std::vector<int> up, down;  // reduce: sent to; broadcast: received from
    for (const AlgoStep& s : work->steps()) {
      EXPECT_EQ(s.send_block, -1);
      if (s.phase == StepPhase::kReduce && s.send_peer >= 0) up.push_back(s.send_peer);
      if (s.phase == StepPhase::kBroadcast && s.recv_peer >= 0) down.push_back(s.recv_peer);
    }
    const int parent = r == 0 ? -1 : r - (r & -r);
    EXPECT_EQ(up, parent < 0 ? std::vector<int>{} : std::vector<int>{parent}) << "rank " << r;
    EXPECT_EQ(down, parent < 0 ? std::vector<int>{} : std::vector<int>{parent}) << "rank " << r;
  });
}

TEST_P(StepsTest, NaiveMessagesGoThroughRankZero) {
  const int n = 3;
  with_comms(GetParam(), n, [&](Communicator& c) {
    std::vector<float> data(2, 1.0f);
    auto work = c.all_reduce(data.data(), 2, DataType::kFloat32, ReduceOp::kSum, Algorithm::kNaive);
    work->wait();
    const auto& steps = work->steps();
    if (c.rank() == 0) {
      ASSERT_EQ(steps.size(), 2u * (n - 1));
      for (int q = 1; q < n; ++q) {
        EXPECT_EQ(steps[q - 1].phase, StepPhase::kReduce);
        EXPECT_EQ(steps[q - 1].recv_peer, q);
        EXPECT_EQ(steps[n - 1 + q - 1].phase, StepPhase::kBroadcast);
        EXPECT_EQ(steps[n - 1 + q - 1].send_peer, q);
      }
    } else {
      ASSERT_EQ(steps.size(), 2u);
      EXPECT_EQ(steps[0].send_peer, 0);
      EXPECT_EQ(steps[1].recv_peer, 0);
    }
  });
}

// Recursive doubling, stated per rank as (phase, index, send peer, receive
// peer), whole buffers. n = 4: rounds 0 and 1 with partners r^1 and r^2.
// n = 3: rank 1 folds into rank 0 (round 0), rank 0 exchanges with rank 2
// (round 1) and sends the result back to rank 1. n = 6: ranks 0,1 and 2,3
// fold into 0 and 2; then 0,2,4,5 exchange as 0..3 of a world of 4.
TEST_P(StepsTest, DoublingExchangesWithPartners) {
  struct Want {
    StepPhase phase;
    int index, send_peer, recv_peer;
  };
  const auto R = StepPhase::kReduce, B = StepPhase::kBroadcast;
  const std::map<int, std::vector<std::vector<Want>>> worlds{
      {4,
       {{{R, 0, 1, 1}, {R, 1, 2, 2}},
        {{R, 0, 0, 0}, {R, 1, 3, 3}},
        {{R, 0, 3, 3}, {R, 1, 0, 0}},
        {{R, 0, 2, 2}, {R, 1, 1, 1}}}},
      {3,
       {{{R, 0, -1, 1}, {R, 1, 2, 2}, {B, 0, 1, -1}},
        {{R, 0, 0, -1}, {B, 0, -1, 0}},
        {{R, 1, 0, 0}}}},
      {6,
       {{{R, 0, -1, 1}, {R, 1, 2, 2}, {R, 2, 4, 4}, {B, 0, 1, -1}},
        {{R, 0, 0, -1}, {B, 0, -1, 0}},
        {{R, 0, -1, 3}, {R, 1, 0, 0}, {R, 2, 5, 5}, {B, 0, 3, -1}},
        {{R, 0, 2, -1}, {B, 0, -1, 2}},
        {{R, 1, 5, 5}, {R, 2, 0, 0}},
        {{R, 1, 4, 4}, {R, 2, 2, 2}}}}};
  constexpr int64_t kCount = 5;
  for (const auto& world : worlds) {
    const int n = world.first;
    const auto& want = world.second;
    with_comms(GetParam(), n, [&](Communicator& c) {
      const int r = c.rank();
      std::vector<float> data(kCount, 1.0f);
      auto work = c.all_reduce(data.data(), kCount, DataType::kFloat32, ReduceOp::kSum,
                               Algorithm::kDoubling);
      work->wait();
      EXPECT_EQ(data, std::vector<float>(kCount, static_cast<float>(n)));
      const auto& steps = work->steps();
      const auto& mine = want[static_cast<std::size_t>(r)];
      ASSERT_EQ(steps.size(), mine.size()) << n << " ranks, rank " << r;
      for (std::size_t k = 0; k < steps.size(); ++k) {
        const AlgoStep& s = steps[k];
        SCOPED_TRACE(str(n, " ranks, rank ", r, " step ", k));
        EXPECT_EQ(s.phase, mine[k].phase);
        EXPECT_EQ(s.index, mine[k].index);
        EXPECT_EQ(s.send_peer, mine[k].send_peer);
        EXPECT_EQ(s.recv_peer, mine[k].recv_peer);
        EXPECT_EQ(s.send_block, -1);
        EXPECT_EQ(s.recv_block, -1);
        EXPECT_EQ(s.send_bytes, s.send_peer >= 0 ? 4 * kCount : 0);
        EXPECT_EQ(s.recv_bytes, s.recv_peer >= 0 ? 4 * kCount : 0);
        EXPECT_LE(work->start_ns(), s.start_ns);
        EXPECT_LE(s.start_ns, s.end_ns);
        EXPECT_LE(s.end_ns, work->end_ns());
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, StepsTest,
                         ::testing::Values(TransportKind::kTcp, TransportKind::kShm),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace mddp::comm::test

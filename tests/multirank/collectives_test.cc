// The other collectives (reduce_scatter, all_gather, broadcast, reduce,
// scatter, gather, barrier, send/recv) on every transport and world size,
// for counts 0, 1, 7, n-1 and a large non-divisible one.
#include <atomic>
#include <thread>

#include "tests/multirank/harness.h"

namespace mddp::comm::test {
namespace {

class CollectivesTest : public ::testing::TestWithParam<WorldParam> {};

const DataType kDtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};

// Roots worth trying: the first and the last rank (a tree rooted away from 0).
std::vector<int> roots(int n) {
  return n == 1 ? std::vector<int>{0} : std::vector<int>{0, n - 1};
}

TEST_P(CollectivesTest, ReduceScatter) {
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().world;
  with_comms(kind, n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (auto op : kOps)
      for (auto t : kDtypes)
        for (int64_t count : block_counts(n)) {
          SCOPED_TRACE(str("rank ", r, " ", to_string(op), " ", to_string(t), " count ", count));
          Buffer in = make_input(t, count * n, r);
          Buffer out(t, count);
          comm.reduce_scatter(in.data(), out.data(), count, t, op)->wait();
          // Block r of the whole input is elements [r*count, (r+1)*count).
          ASSERT_TRUE(matches(out, 0, count,
                              [&, e = Expected(t, op, n)](int64_t i) { return e(r * count + i); }));
          // In place (out == in + r*count, NCCL's convention; --ddp
          // sharded's gradients): block r of the buffer becomes the result.
          auto* block_r = static_cast<std::byte*>(in.data()) +
                          static_cast<std::size_t>(r * count) * element_size(t);
          comm.reduce_scatter(in.data(), block_r, count, t, op)->wait();
          ASSERT_TRUE(matches(in, r * count, count,
                              [&, e = Expected(t, op, n)](int64_t i) { return e(r * count + i); }));
        }
  });
}

TEST_P(CollectivesTest, AllGather) {
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().world;
  with_comms(kind, n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (auto t : kDtypes)
      for (int64_t count : block_counts(n)) {
        SCOPED_TRACE(str("rank ", r, " ", to_string(t), " count ", count));
        const std::size_t block = static_cast<std::size_t>(count) * element_size(t);
        auto in = pattern(r, block, 1);
        std::vector<uint8_t> out(block * n);
        comm.all_gather(in.data(), out.data(), count, t)->wait();
        for (int q = 0; q < n; ++q)
          ASSERT_TRUE(same_bytes(out.data() + q * block, pattern(q, block, 1).data(), block))
              << "block " << q;
      }
  });
}

TEST_P(CollectivesTest, BroadcastFromEveryRootKind) {
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().world;
  with_comms(kind, n, [&](Communicator& comm) {
    for (int root : roots(n))
      for (auto t : kDtypes)
        for (int64_t count : sweep_counts(n)) {
          SCOPED_TRACE(
              str("rank ", comm.rank(), " root ", root, " ", to_string(t), " count ", count));
          const std::size_t bytes = static_cast<std::size_t>(count) * element_size(t);
          auto data = pattern(comm.rank(), bytes, 2);
          comm.broadcast(data.data(), count, t, root)->wait();
          ASSERT_TRUE(same_bytes(data.data(), pattern(root, bytes, 2).data(), bytes));
        }
  });
}

TEST_P(CollectivesTest, Reduce) {
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().world;
  with_comms(kind, n, [&](Communicator& comm) {
    for (int root : roots(n))
      for (auto op : kOps)
        for (auto t : kDtypes)
          for (int64_t count : sweep_counts(n)) {
            SCOPED_TRACE(str("rank ", comm.rank(), " root ", root, " ", to_string(op), " ",
                             to_string(t), " count ", count));
            Buffer buf = make_input(t, count, comm.rank());
            comm.reduce(buf.data(), count, t, op, root)->wait();
            if (comm.rank() == root) {
              ASSERT_TRUE(matches(buf, 0, count, Expected(t, op, n)));
            }
          }
  });
}

TEST_P(CollectivesTest, ScatterAndGather) {
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().world;
  with_comms(kind, n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (int root : roots(n))
      for (auto t : kDtypes)
        for (int64_t count : block_counts(n)) {
          SCOPED_TRACE(str("rank ", r, " root ", root, " ", to_string(t), " count ", count));
          const std::size_t block = static_cast<std::size_t>(count) * element_size(t);
          // scatter: root's block q (pattern(q)) lands on rank q.
          std::vector<uint8_t> all;
          if (r == root)
            for (int q = 0; q < n; ++q) {
              auto b = pattern(q, block, 3);
              all.insert(all.end(), b.begin(), b.end());
            }
          std::vector<uint8_t> mine(block);
          comm.scatter(all.data(), mine.data(), count, t, root)->wait();
          ASSERT_TRUE(same_bytes(mine.data(), pattern(r, block, 3).data(), block)) << "scatter";
          // gather: each rank's pattern(r) lands in root's block r.
          auto in = pattern(r, block, 4);
          std::vector<uint8_t> out(r == root ? block * n : 0);
          comm.gather(in.data(), out.data(), count, t, root)->wait();
          if (r == root) {
            for (int q = 0; q < n; ++q)
              ASSERT_TRUE(same_bytes(out.data() + q * block, pattern(q, block, 4).data(), block))
                  << "gather block " << q;
          }
        }
  });
}

// No rank leaves a barrier before every rank has entered it: each rank
// counts itself in, and after the barrier must see all n.
TEST_P(CollectivesTest, BarrierWaitsForEveryRank) {
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().world;
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> arrived{0};
    with_comms(kind, n, [&](Communicator& comm) {
      // The last rank is late, so an early exit would be seen.
      if (comm.rank() == n - 1) std::this_thread::sleep_for(20ms);
      arrived.fetch_add(1);
      comm.barrier()->wait();
      EXPECT_EQ(arrived.load(), n) << "rank " << comm.rank() << " left the barrier early";
      comm.barrier()->wait();
    });
  }
}

// send/recv round a ring: rank 0 sends first and the others receive first,
// so every send meets a posted receive (one progress thread per rank runs
// its queue in order, and a transport need not buffer a whole message).
TEST_P(CollectivesTest, SendRecvRing) {
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().world;
  if (n == 1) GTEST_SKIP() << "no peer to talk to";
  with_comms(kind, n, [&](Communicator& comm) {
    const int r = comm.rank(), right = (r + 1) % n, left = (r + n - 1) % n;
    for (int64_t count : sweep_counts(n)) {
      const std::size_t bytes = static_cast<std::size_t>(count) * 4;
      auto out = pattern(r, bytes, 5);
      std::vector<uint8_t> in(bytes);
      WorkPtr first, second;
      if (r == 0) {
        first = comm.send(out.data(), count, DataType::kFloat32, right);
        second = comm.recv(in.data(), count, DataType::kFloat32, left);
      } else {
        first = comm.recv(in.data(), count, DataType::kFloat32, left);
        second = comm.send(out.data(), count, DataType::kFloat32, right);
      }
      first->wait();
      second->wait();
      ASSERT_TRUE(same_bytes(in.data(), pattern(left, bytes, 5).data(), bytes))
          << "count " << count;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, CollectivesTest, ::testing::ValuesIn(all_worlds()), world_name);

}  // namespace
}  // namespace mddp::comm::test

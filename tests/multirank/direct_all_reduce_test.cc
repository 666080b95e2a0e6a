// The direct all-reduce (core/comm/algorithms/direct_all_reduce.cc): ranks
// on shared memory whose buffers lie in the arena (allocate_shared) reduce
// straight out of each other's buffers. Results against the exact
// reference, the same bits on every rank, the fallback when one rank's
// buffer is private, the failures that name a rank, and the race a missing
// wait would open: a rank overwriting its buffer while a peer still reads it.
#include <gmock/gmock.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <mutex>
#include <random>

#include "core/comm/transport/shm/shm_transport.h"
#include "tests/multirank/harness.h"

namespace mddp::comm::test {
namespace {

// In this binary a rank waits a random 0..200 us before it touches its
// peers' buffers and before it says it is finished with them (the seam in
// direct_all_reduce.cc), so that a rank that returned early has time to
// overwrite its buffer before a slow peer is done with it.
const bool kDelays = (::setenv("MDDP_TEST_DIRECT_DELAY_US", "200", 1), true);

// `count` elements of `t` in this rank's shared arena.
struct SharedBuffer {
  std::shared_ptr<void> memory;
  std::size_t bytes;
  SharedBuffer(Communicator& comm, DataType t, int64_t count)
      : memory(comm.allocate_shared(static_cast<std::size_t>(count) * element_size(t))),
        bytes(static_cast<std::size_t>(count) * element_size(t)) {}
  void* data() const { return memory.get(); }
  // (An empty Buffer's data() is null: memcpy must not see it, even for 0 bytes.)
  void put(const Buffer& b) const {
    if (bytes > 0) std::memcpy(data(), b.data(), bytes);
  }
  Buffer get(DataType t) const {
    Buffer b(t, static_cast<int64_t>(bytes / element_size(t)));
    if (bytes > 0) std::memcpy(b.data(), data(), bytes);
    return b;
  }
};

TEST(DirectAllReduce, EveryOpDtypeAndCountGivesTheExactResult) {
  for (int n : {2, 3, 4})
    with_comms(TransportKind::kShm, n, [&](Communicator& comm) {
      ASSERT_NE(comm.allocate_shared(1), nullptr) << "no shared arena on the shm transport";
      for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin})
        for (auto t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16})
          for (int64_t count : sweep_counts(n)) {
            SCOPED_TRACE(str("rank ", comm.rank(), " of ", n, " ", to_string(op), " ", to_string(t),
                             " count ", count));
            const SharedBuffer shared(comm, t, count);
            shared.put(make_input(t, count, comm.rank()));
            comm.all_reduce(shared.data(), count, t, op)->wait();
            EXPECT_EQ(comm.history().back().op, "all_reduce(direct)");
            ASSERT_TRUE(matches(shared.get(t), 0, count, Expected(t, op, n)));
          }
    });
}

// Inexact sums: every rank must still end with the very same bits.
TEST(DirectAllReduce, EveryRankHoldsTheSameBits) {
  const int n = 3;
  const int64_t count = 50021;
  std::mutex mu;
  std::vector<std::vector<uint8_t>> results(n);
  with_comms(TransportKind::kShm, n, [&](Communicator& comm) {
    const SharedBuffer shared(comm, DataType::kFloat32, count);
    std::mt19937 rng(static_cast<unsigned>(comm.rank() + 1));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    auto* x = static_cast<float*>(shared.data());
    for (int64_t i = 0; i < count; ++i) x[i] = dist(rng);
    comm.all_reduce(x, count, DataType::kFloat32, ReduceOp::kAvg)->wait();
    std::lock_guard lock(mu);
    results[static_cast<std::size_t>(comm.rank())] = shared.get(DataType::kFloat32).bytes();
  });
  for (int r = 1; r < n; ++r)
    EXPECT_TRUE(same_bytes(results[r].data(), results[0].data(), results[0].size()))
        << "rank " << r;
}

// Its steps (Work::steps(), the dashboard's Collectives view): one per peer
// and direction, as the ring's are; reading block r from each peer is the
// reduce-scatter, writing it to each the all-gather.
TEST(DirectAllReduce, RecordsAStepPerPeerAndDirection) {
  const int n = 3;
  with_comms(TransportKind::kShm, n, [&](Communicator& comm) {
    const SharedBuffer shared(comm, DataType::kFloat32, 3000);
    const auto work = comm.all_reduce(shared.data(), 3000, DataType::kFloat32, ReduceOp::kSum);
    work->wait();
    const int r = comm.rank();
    std::vector<int> read_from, wrote_to;
    for (const AlgoStep& s : work->steps()) {
      if (s.phase == StepPhase::kReduceScatter) {
        EXPECT_EQ(s.recv_block, r);
        EXPECT_EQ(s.recv_bytes, 1000 * 4);
        read_from.push_back(s.recv_peer);
      } else {
        EXPECT_EQ(s.phase, StepPhase::kAllGather);
        EXPECT_EQ(s.send_block, r);
        wrote_to.push_back(s.send_peer);
      }
    }
    const std::vector<int> peers{(r + 1) % n, (r + 2) % n};
    EXPECT_EQ(read_from, peers) << "rank " << r;
    EXPECT_EQ(wrote_to, peers) << "rank " << r;
    // The shape analyze and the dashboard tell it by; the ring's is not it.
    EXPECT_EQ(algorithm_of(work->steps()), "direct");
    Buffer priv = make_input(DataType::kFloat32, 3000, r);
    const auto ring =
        comm.all_reduce(priv.data(), 3000, DataType::kFloat32, ReduceOp::kSum, Algorithm::kRing);
    ring->wait();
    EXPECT_FALSE(ring->steps().empty());
    EXPECT_EQ(algorithm_of(ring->steps()), "");
  });
}

// One rank's buffer is private: every rank falls back to the flat
// algorithm for that collective, and the next one runs direct again.
TEST(DirectAllReduce, APrivateBufferOnOneRankMakesEveryRankFallBack) {
  const int n = 3;
  const int64_t count = 100003;
  const auto t = DataType::kFloat32;
  with_comms(TransportKind::kShm, n, [&](Communicator& comm) {
    const SharedBuffer shared(comm, t, count);
    Buffer priv = make_input(t, count, comm.rank());
    void* data = comm.rank() == 1 ? priv.data() : shared.data();
    shared.put(make_input(t, count, comm.rank()));
    comm.all_reduce(data, count, t, ReduceOp::kSum)->wait();
    const Buffer got = comm.rank() == 1 ? priv : shared.get(t);
    ASSERT_TRUE(matches(got, 0, count, Expected(t, ReduceOp::kSum, n)));
    shared.put(make_input(t, count, comm.rank()));
    comm.all_reduce(shared.data(), count, t, ReduceOp::kSum)->wait();
    ASSERT_TRUE(matches(shared.get(t), 0, count, Expected(t, ReduceOp::kSum, n)));
  });
}

// The race: each rank writes its next input into its buffer the moment its
// all-reduce returns, while reads of the peers' buffers are delayed at
// random (kDelays). A rank that returned before its peers finished reading
// its buffer would hand them the next step's numbers.
TEST(DirectAllReduce, ABufferIsNeverOverwrittenWhileAPeerReadsIt) {
  ASSERT_TRUE(kDelays);
  const int n = 4, steps = 150;
  const int64_t count = 4099;
  const auto t = DataType::kFloat32;
  with_comms(TransportKind::kShm, n, [&](Communicator& comm) {
    const SharedBuffer shared(comm, t, count);
    auto* x = static_cast<float*>(shared.data());
    for (int step = 0; step < steps; ++step) {
      // Rank r's element i at this step: exact in fp32, different every step.
      const auto input = [&](int r, int64_t i) {
        return static_cast<float>(step * 64 + r * 8 + i % 8);
      };
      for (int64_t i = 0; i < count; ++i) x[i] = input(comm.rank(), i);
      comm.all_reduce(x, count, t, ReduceOp::kSum)->wait();
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += input(r, i);
        wrong += x[i] != want;
      }
      ASSERT_EQ(wrong, 0) << "rank " << comm.rank() << " step " << step;
    }
  });
}

// Failures name the rank: a peer that posts another size, and a peer that
// leaves instead of joining.
TEST(DirectAllReduce, APeerPostingAnotherSizeIsNamed) {
  with_comms(TransportKind::kShm, 2, [&](Communicator& comm) {
    const int64_t count = comm.rank() == 0 ? 1000 : 2000;
    const SharedBuffer shared(comm, DataType::kFloat32, count);
    try {
      comm.all_reduce(shared.data(), count, DataType::kFloat32, ReduceOp::kSum)->wait();
      ADD_FAILURE() << "rank " << comm.rank() << ": no error";
    } catch (const PeerError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("different collectives or sizes"));
      EXPECT_EQ(e.peer(), 1 - comm.rank());
    }
  });
}

TEST(DirectAllReduce, APeerThatLeavesIsNamed) {
  with_comms(TransportKind::kShm, 2, [&](Communicator& comm) {
    if (comm.rank() == 1) return;  // its communicator closes
    const SharedBuffer shared(comm, DataType::kFloat32, 100);
    try {
      comm.all_reduce(shared.data(), 100, DataType::kFloat32, ReduceOp::kSum)->wait();
      ADD_FAILURE() << "no error";
    } catch (const PeerError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("rank 1 closed its transport"));
      EXPECT_EQ(e.fault(), PeerFault::kClosed);
    }
  });
}

// Forcing an algorithm (the course's demos, --algo) never runs direct; and
// a full arena hands out nothing rather than memory it does not have.
TEST(DirectAllReduce, AForcedAlgorithmAndAFullArena) {
  with_comms(TransportKind::kShm, 2, [&](Communicator& comm) {
    const SharedBuffer shared(comm, DataType::kFloat32, 1000);
    comm.all_reduce(shared.data(), 1000, DataType::kFloat32, ReduceOp::kSum, Algorithm::kRing)
        ->wait();
    EXPECT_EQ(comm.history().back().op, "all_reduce(ring)");
  });
  MemoryStore store;
  // spdlog's registry is made on first use; made here, before the ranks'
  // threads warn of the full arena, ThreadSanitizer sees it published to
  // them (libspdlog is not instrumented: as in hierarchical_test.cc).
  spdlog::default_logger();
  mddp::test::run_threads(
      2,
      [&](int rank) {
        ShmOptions options;
        options.arena_bytes = 3 * 4096;
        auto shm = ShmTransport::connect(store, rank, 2, kJob, 20s, "comm", options);
        EXPECT_NE(shm->allocate(4096), nullptr);
        EXPECT_NE(shm->allocate(5000), nullptr);  // two pages: the arena is full
        EXPECT_EQ(shm->allocate(1), nullptr);
        EXPECT_FALSE(shm->holds(nullptr, 0));
      },
      60s);
}

}  // namespace
}  // namespace mddp::comm::test

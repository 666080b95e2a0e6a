// Failure behaviour: a missing peer times out with a message naming it, the
// collective and its sequence number, followed by the history; abort()
// unblocks a pending wait at once and fails queued work; after the first
// error every later call fails fast; a peer that goes away is a PeerError;
// destroying a communicator with work pending fails that work.
#include <atomic>
#include <functional>
#include <thread>

#include "tests/multirank/harness.h"

namespace mddp::comm::test {
namespace {

// Runs fn on rank 0 of a 2-rank world whose rank 1 stays connected but takes
// part in nothing until fn has returned: the peer that never answers.
void with_silent_peer(TransportKind kind, const std::function<void(Communicator&)>& fn,
                      CommOptions options) {
  std::atomic<bool> done{false};
  with_comms(
      kind, 2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) {
          wait_for(done);
          return;
        }
        fn(comm);
        done = true;
      },
      options);
}

class FailureTest : public ::testing::TestWithParam<TransportKind> {};

// Rank n-1 never joins the all-reduce: rank 0's error names rank 0, the
// collective with its algorithm and sequence number, the missing rank, and
// ends with the history (the barrier that finished, the all-reduce that did not).
TEST_P(FailureTest, TimeoutNamesTheMissingPeer) {
  for (auto algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kDoubling}) {
    const int n = 3;
    std::atomic<bool> done{false};
    with_comms(
        GetParam(), n,
        [&](Communicator& comm) {
          comm.barrier()->wait();
          if (comm.rank() == n - 1) {
            wait_for(done);
            return;
          }
          std::vector<float> data(1000, 1.0f);
          const auto start = Clock::now();
          auto work = comm.all_reduce(data.data(), 1000, DataType::kFloat32, ReduceOp::kSum, algo);
          if (comm.rank() == 1) {
            // Rank 1 waits on rank 0 or rank 2; once rank 0 has failed it
            // may also see rank 0's connection close. Either way it fails.
            EXPECT_THROW(work->wait(), CommError);
            return;
          }
          const std::string msg = expect_error<TimeoutError>(work);
          const auto took = Clock::now() - start;
          EXPECT_TRUE(msg.starts_with(str("rank 0: all_reduce(", to_string(algo), ") #2: ")))
              << msg;
          EXPECT_TRUE(contains(msg, "timed out")) << msg;
          EXPECT_TRUE(contains(msg, "rank 2")) << msg;  // the missing peer
          EXPECT_TRUE(contains(msg, "#1 barrier")) << msg;
          EXPECT_TRUE(contains(msg, "never finished")) << msg;
          EXPECT_TRUE(contains(msg, "hint:")) << msg;
          EXPECT_GE(took, 250ms);
          EXPECT_LT(took, 5s);
          done = true;
        },
        CommOptions{Algorithm::kAuto, 300ms});
  }
}

// After the first error nothing runs: later calls fail at once with the
// first error's type and text.
TEST_P(FailureTest, LaterCallsFailFastWithTheFirstError) {
  with_silent_peer(
      GetParam(),
      [](Communicator& comm) {
        float x = 1;
        const std::string first =
            expect_error<TimeoutError>(comm.all_reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum));
        const auto start = Clock::now();
        const std::string later =
            expect_error<TimeoutError>(comm.broadcast(&x, 1, DataType::kFloat32, 0));
        EXPECT_LT(Clock::now() - start, 300ms);  // the timeout would take 600 ms
        EXPECT_TRUE(later.starts_with("rank 0: broadcast(root 0) #2: not run")) << later;
        EXPECT_TRUE(contains(later, first.substr(0, first.find('\n')))) << later;
      },
      CommOptions{Algorithm::kAuto, 600ms});
}

// abort() from another thread wakes a wait that would otherwise last the
// whole (long) timeout, fails the work queued behind it, and every later call.
TEST_P(FailureTest, AbortUnblocksPendingAndQueuedWork) {
  with_silent_peer(
      GetParam(),
      [](Communicator& comm) {
        std::vector<float> a(100, 1.0f), b(100, 2.0f);
        auto running = comm.all_reduce(a.data(), 100, DataType::kFloat32, ReduceOp::kSum);
        auto queued = comm.all_reduce(b.data(), 100, DataType::kFloat32, ReduceOp::kSum);
        const auto start = Clock::now();
        std::thread aborter([&] {
          std::this_thread::sleep_for(100ms);
          comm.abort("the coordinator reported rank 1 dead");
        });
        const std::string msg = expect_error<AbortedError>(running);
        aborter.join();
        EXPECT_LT(Clock::now() - start, 5s);  // not the 60 s timeout
        EXPECT_TRUE(msg.starts_with("rank 0: all_reduce(")) << msg;
        EXPECT_TRUE(contains(msg, "the coordinator reported rank 1 dead")) << msg;
        EXPECT_TRUE(contains(expect_error<AbortedError>(queued), "#2: not run"));
        EXPECT_TRUE(contains(expect_error<AbortedError>(comm.barrier()), "rank 1 dead"));
        comm.abort("again");  // idempotent
      },
      CommOptions{Algorithm::kAuto, 60s});
}

// A peer whose communicator goes away mid-job: the survivor's next
// collective fails with a PeerError naming it, long before the timeout,
// whichever algorithm runs it.
TEST_P(FailureTest, PeerThatLeftIsAPeerError) {
  for (auto algo : {Algorithm::kRing, Algorithm::kNaive, Algorithm::kTree, Algorithm::kDoubling}) {
    std::atomic<bool> left{false};
    MemoryStore store;
    mddp::test::run_threads(
        2,
        [&](int rank) {
          auto comm = connect(store, rank, 2, kJob, GetParam(), CommOptions{Algorithm::kAuto, 30s});
          comm->barrier()->wait();
          if (rank == 1) {
            comm.reset();  // closes its connections
            left = true;
            return;
          }
          wait_for(left);
          float x = 1;
          const auto start = Clock::now();
          const std::string msg = expect_error<PeerError>(
              comm->all_reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum, algo));
          EXPECT_LT(Clock::now() - start, 5s);
          EXPECT_TRUE(msg.starts_with(str("rank 0: all_reduce(", to_string(algo), ") #2: ")))
              << msg;
          EXPECT_TRUE(contains(msg, "rank 1")) << msg;
        },
        60s);
  }
}

// Destroying a communicator with work in flight aborts it: the handle the
// caller still holds reports AbortedError, and destruction is prompt.
TEST_P(FailureTest, DestructionFailsPendingWork) {
  std::atomic<bool> done{false};
  MemoryStore store;
  mddp::test::run_threads(
      2,
      [&](int rank) {
        auto comm = connect(store, rank, 2, kJob, GetParam(), CommOptions{Algorithm::kAuto, 60s});
        if (rank == 1) {
          wait_for(done);
          return;
        }
        float x = 1;
        auto work = comm->all_reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum);
        std::this_thread::sleep_for(50ms);
        const auto start = Clock::now();
        comm.reset();
        EXPECT_LT(Clock::now() - start, 5s);
        EXPECT_TRUE(contains(expect_error<AbortedError>(work), "destroyed"));
        done = true;
      },
      60s);
}

INSTANTIATE_TEST_SUITE_P(Transports, FailureTest,
                         ::testing::Values(TransportKind::kTcp, TransportKind::kShm),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace mddp::comm::test

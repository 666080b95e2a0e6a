// Ranks as real processes (fork), rendezvous through a FileStore: the way
// `microddp bench allreduce --nproc N` and real jobs run. A few cases only;
// the sweeps run on threads.
#include <signal.h>

#include "core/comm/file_store.h"
#include "tests/multirank/harness.h"

namespace mddp::comm::test {
namespace {

class ProcessTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(ProcessTest, AllReduceAndBroadcastAcrossProcesses) {
  const int n = 4;
  mddp::test::TempDir dir;
  mddp::test::run_processes(
      n,
      [&](int rank) {
        FileStore store(dir.path());
        auto comm = connect(store, rank, n, kJob, GetParam(), CommOptions{Algorithm::kAuto, 20s});
        for (auto algo :
             {Algorithm::kRing, Algorithm::kTree, Algorithm::kNaive, Algorithm::kDoubling})
          for (auto [t, op] : {std::pair{DataType::kFloat32, ReduceOp::kSum},
                               std::pair{DataType::kBFloat16, ReduceOp::kAvg}}) {
            const int64_t count = 100003;
            Buffer buf = make_input(t, count, rank);
            comm->all_reduce(buf.data(), count, t, op, algo)->wait();
            EXPECT_TRUE(matches(buf, 0, count, Expected(t, op, n)))
                << to_string(algo) << " " << to_string(t);
          }
        float token = rank == 3 ? 42.0f : 0.0f;
        comm->broadcast(&token, 1, DataType::kFloat32, 3)->wait();
        EXPECT_EQ(token, 42.0f);
        comm->barrier()->wait();
      },
      60s);
}

// A rank SIGKILLed while the other runs an all-reduce: every algorithm ends
// the survivor the same way, promptly, with a PeerError naming the dead rank
// and what was seen of it (its pid gone on shared memory; the connection
// closed or reset on TCP).
TEST_P(ProcessTest, KilledPeerIsTheSamePeerErrorForEveryAlgorithm) {
  for (auto algo : {Algorithm::kRing, Algorithm::kNaive, Algorithm::kTree, Algorithm::kDoubling}) {
    mddp::test::TempDir dir;
    const auto status = mddp::test::spawn_processes(
        2,
        [&](int rank) {
          FileStore store(dir.path());
          auto comm = connect(store, rank, 2, kJob, GetParam(), CommOptions{Algorithm::kAuto, 60s});
          comm->barrier()->wait();
          if (rank == 1) {
            store.get("die", 30s);  // once rank 0 has finished the barrier
            ::kill(::getpid(), SIGKILL);
          }
          store.set("die", "");
          std::vector<float> data(1000, 1.0f);
          const auto start = Clock::now();
          try {
            comm->all_reduce(data.data(), 1000, DataType::kFloat32, ReduceOp::kSum, algo)->wait();
            ADD_FAILURE() << to_string(algo) << ": an all-reduce with a killed peer returned";
          } catch (const PeerError& e) {
            const std::string msg = e.what();
            EXPECT_TRUE(msg.starts_with(str("rank 0: all_reduce(", to_string(algo), ") #2: ")))
                << msg;
            EXPECT_TRUE(contains(msg, "rank 1")) << msg;
            EXPECT_EQ(e.peer(), 1) << msg;
            if (GetParam() == TransportKind::kShm) {
              EXPECT_EQ(e.fault(), PeerFault::kDied) << msg;
            } else {
              EXPECT_TRUE(e.fault() == PeerFault::kClosed || e.fault() == PeerFault::kReset) << msg;
            }
          }
          EXPECT_LT(Clock::now() - start, 10s);
        },
        60s);
    ASSERT_EQ(status.size(), 2u);
    EXPECT_TRUE(status[0].ok()) << to_string(algo) << ": rank 0 " << status[0].describe();
    EXPECT_EQ(status[1].signal, SIGKILL) << to_string(algo) << ": rank 1 " << status[1].describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ProcessTest,
                         ::testing::Values(TransportKind::kTcp, TransportKind::kShm),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace mddp::comm::test

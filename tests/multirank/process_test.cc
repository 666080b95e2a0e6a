// Ranks as real processes (fork), rendezvous through a FileStore: the way
// `microddp bench allreduce --nproc N` and real jobs run. A few cases only;
// the sweeps run on threads.
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
        for (auto algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kNaive})
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

INSTANTIATE_TEST_SUITE_P(Transports, ProcessTest,
                         ::testing::Values(TransportKind::kTcp, TransportKind::kShm),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace mddp::comm::test

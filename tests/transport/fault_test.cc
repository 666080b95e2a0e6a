// Process-level faults: ranks are real processes (FileStore rendezvous). A
// rank SIGKILLed in the middle of a message must end its peers with a
// PeerError promptly, never a hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "core/comm/file_store.h"
#include "support/files.h"
#include "support/ranks.h"
#include "transport_fixture.h"

namespace mddp::comm::test {
namespace {

using mddp::test::spawn_processes;
using mddp::test::TempDir;

class FaultTest : public ::testing::TestWithParam<TransportKind> {};

// Rank 1 starts sending 256 MiB to rank 0 and is SIGKILLed a few ms in;
// rank 2 waits for a message from rank 1 that will never come. Both must get
// a PeerError naming rank 1, long before their 60 s deadlines.
TEST_P(FaultTest, PeerKilledMidTransferEndsOthersWithPeerError) {
  TempDir dir;
  const auto kind = GetParam();
  auto status = spawn_processes(
      3,
      [&](int rank) {
        FileStore store(dir.path());
        auto t = connect_rank(store, rank, 3, kind);
        const std::size_t bytes = 256u << 20;
        std::vector<uint8_t> buf(bytes, static_cast<uint8_t>(rank));
        if (rank == 1) {
          std::thread killer([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            ::kill(::getpid(), SIGKILL);
          });
          t->send(0, buf.data(), bytes, in(60s));
          killer.join();  // never returns: the process dies first
          return;
        }
        auto start = Clock::now();
        try {
          // Rank 0: a long message that stops midway. (Should the whole of it
          // have made it before the kill, the next receive fails instead.)
          if (rank == 0) t->recv(1, buf.data(), bytes, in(60s));
          t->recv(1, buf.data(), 4, in(60s));
          ADD_FAILURE() << "rank " << rank << ": receive from a killed rank returned";
        } catch (const PeerError& e) {
          EXPECT_TRUE(contains(e.what(), str("rank ", rank, ":"))) << e.what();
          EXPECT_TRUE(contains(e.what(), "rank 1")) << e.what();
          // What the coordinator weighs (Note [Who is at fault]): the peer, and
          // what was seen of it: its process gone (shared memory watches its
          // pid), or its connection closed or reset (TCP cannot tell which).
          EXPECT_EQ(e.peer(), 1) << e.what();
          if (kind == TransportKind::kShm)
            EXPECT_EQ(e.fault(), PeerFault::kDied) << e.what();
          else
            EXPECT_TRUE(e.fault() == PeerFault::kClosed || e.fault() == PeerFault::kReset)
                << e.what();
        }
        EXPECT_LT(Clock::now() - start, 30s);
      },
      120s);
  ASSERT_EQ(status.size(), 3u);
  EXPECT_TRUE(status[0].ok()) << "rank 0 " << status[0].describe();
  EXPECT_EQ(status[1].signal, SIGKILL) << "rank 1 " << status[1].describe();
  EXPECT_TRUE(status[2].ok()) << "rank 2 " << status[2].describe();
}

// A rank that never shows up: the others time out connecting, naming it.
// (2 s, not less: a rank that starts later than its peer by more than the
// timeout finds the peer gone instead, which happened under ThreadSanitizer
// on two busy cores.)
TEST_P(FaultTest, MissingRankTimesOutTheRendezvousNamingIt) {
  TempDir dir;
  const auto kind = GetParam();
  mddp::test::run_processes(
      2,
      [&](int rank) {
        FileStore store(dir.path());
        try {
          connect_rank(store, rank, 3, kind, 2s);
          ADD_FAILURE() << "connected without rank 2";
        } catch (const TimeoutError& e) {
          EXPECT_TRUE(contains(e.what(), str("rank ", rank, ":"))) << e.what();
          EXPECT_TRUE(contains(e.what(), "rank 2")) << e.what();
        }
      },
      60s);
}

INSTANTIATE_TEST_SUITE_P(Kinds, FaultTest,
                         ::testing::Values(TransportKind::kTcp, TransportKind::kShm), kind_name);

}  // namespace
}  // namespace mddp::comm::test

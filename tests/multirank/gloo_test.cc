// The gloo backend (core/comm/gloo): every collective the DDP layer needs
// against the independent reference of harness.h, over gloo's TCP between
// thread-ranks; and its failures mapped to microddp's: a silent peer is a
// TimeoutError, a peer that leaves a PeerError, abort() an AbortedError at
// once (not the timeout), and the first failure ends the group.
#include "core/comm/gloo/gloo.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "tests/multirank/harness.h"

namespace mddp::comm::test {
namespace {

using gloo::connect_gloo;

void with_gloo(int n, const std::function<void(ProcessGroup&)>& fn,
               std::chrono::milliseconds timeout = 20s) {
  MemoryStore store;
  mddp::test::run_threads(
      n,
      [&](int rank) {
        auto group = connect_gloo(store, rank, n, {timeout, "127.0.0.1", "comm"});
        fn(*group);
      },
      120s);
}

// The PeerError `work` fails with; any other error is rethrown.
PeerError peer_error_of(const WorkPtr& work) {
  try {
    work->wait();
  } catch (const PeerError& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return PeerError("no error", -1, PeerFault::kUnknown);
}

class GlooTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooTest, AllReduceMatchesTheReference) {
  const int n = GetParam();
  with_gloo(n, [&](ProcessGroup& g) {
    EXPECT_NE(g.transport_name().find("gloo"), std::string::npos);
    for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin})
        for (int64_t count : sweep_counts(n)) {
          Buffer b = make_input(t, count, g.rank());
          g.all_reduce(b.data(), count, t, op)->wait();
          EXPECT_TRUE(matches(b, 0, count, Expected(t, op, n)))
              << "rank " << g.rank() << " " << to_string(t) << " " << to_string(op) << " count "
              << count;
        }
  });
}

// Out of place and in place (out == in + r*count: --ddp sharded's form).
TEST_P(GlooTest, ReduceScatterMatchesTheReference) {
  const int n = GetParam();
  with_gloo(n, [&](ProcessGroup& g) {
    const int r = g.rank();
    for (DataType t : {DataType::kFloat32, DataType::kBFloat16})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg})
        for (int64_t count : block_counts(n)) {
          SCOPED_TRACE(str("rank ", r, " ", to_string(t), " ", to_string(op), " count ", count));
          Buffer in = make_input(t, count * n, r);
          Buffer out(t, count);
          const auto want = [&, e = Expected(t, op, n)](int64_t i) { return e(r * count + i); };
          g.reduce_scatter(in.data(), out.data(), count, t, op)->wait();
          EXPECT_TRUE(matches(out, 0, count, want));
          auto* block_r = static_cast<std::byte*>(in.data()) +
                          static_cast<std::size_t>(r * count) * element_size(t);
          g.reduce_scatter(in.data(), block_r, count, t, op)->wait();
          EXPECT_TRUE(matches(in, r * count, count, want));
        }
  });
}

TEST_P(GlooTest, AllGatherBroadcastAndBarrier) {
  const int n = GetParam();
  with_gloo(n, [&](ProcessGroup& g) {
    for (int64_t count : block_counts(n)) {
      const auto mine = pattern(g.rank(), static_cast<std::size_t>(count) * 4, 1);
      std::vector<uint8_t> out(static_cast<std::size_t>(count * n) * 4);
      g.all_gather(mine.data(), out.data(), count, DataType::kFloat32)->wait();
      for (int q = 0; q < n; ++q) {
        const auto theirs = pattern(q, static_cast<std::size_t>(count) * 4, 1);
        EXPECT_TRUE(same_bytes(out.data() + q * count * 4, theirs.data(), theirs.size()))
            << "rank " << g.rank() << " block " << q << " count " << count;
      }
      for (int root = 0; root < n; ++root) {
        auto data = pattern(g.rank(), static_cast<std::size_t>(count) * 2, 2);
        g.broadcast(data.data(), count, DataType::kBFloat16, root)->wait();
        const auto want = pattern(root, data.size(), 2);
        EXPECT_TRUE(same_bytes(data.data(), want.data(), want.size()))
            << "root " << root << " count " << count;
      }
    }
    g.barrier()->wait();
    EXPECT_EQ(g.history().back().op, "barrier");
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return str("n", info.param); });

// Rank 1 stays connected but never takes part: rank 0 times out, with the
// collective named, and every later call fails at once carrying that error.
TEST(GlooFailure, ASilentPeerIsATimeoutAndEndsTheGroup) {
  std::atomic<bool> done{false};
  with_gloo(
      2,
      [&](ProcessGroup& g) {
        if (g.rank() == 1) {
          wait_for(done);
          return;
        }
        float x[1000] = {};
        const std::string what =
            expect_error<TimeoutError>(g.all_reduce(x, 1000, DataType::kFloat32, ReduceOp::kSum));
        EXPECT_TRUE(contains(what, "rank 0: all_reduce(gloo ring) #1")) << what;
        EXPECT_TRUE(contains(what, "Timed out")) << what;
        EXPECT_TRUE(contains(what, "hint:")) << what;
        const std::string later = expect_error<TimeoutError>(g.barrier());
        EXPECT_TRUE(contains(later, "failed earlier")) << later;
        done = true;
      },
      2s);
}

// Rank 1 leaves (its group is destroyed): rank 0 fails with a PeerError
// long before its 60 s timeout, naming rank 1 (gloo itself says only its
// address: Note [Naming gloo's peers] in gloo_group.cc) and carrying it, so
// a worker can report the broken link to the coordinator.
TEST(GlooFailure, APeerThatLeavesIsAPeerErrorNamingIt) {
  with_gloo(
      2,
      [&](ProcessGroup& g) {
        if (g.rank() == 1) return;
        std::this_thread::sleep_for(100ms);
        std::vector<float> x(1 << 16);
        const PeerError e = peer_error_of(g.all_reduce(x.data(), static_cast<int64_t>(x.size()),
                                                       DataType::kFloat32, ReduceOp::kSum));
        const std::string what = e.what();
        EXPECT_TRUE(
            contains(what, "rank 0: all_reduce(gloo ring) #1: gloo, with rank 1 at [127.0.0.1]:"))
            << what;
        EXPECT_EQ(e.peer(), 1) << what;
        EXPECT_NE(e.fault(), PeerFault::kUnknown) << what;
      },
      60s);
}

// abort() from another thread fails a collective blocked on a silent peer
// with AbortedError carrying the reason (not the TimeoutError it would
// otherwise get); queued work fails too. gloo would wake the blocked wait
// only at its own per-operation timeout (a minute here), so abort()
// abandons it (Note [Aborting gloo] in gloo_group.cc): when abort()
// returns, the collective has failed, and destroying the group returns
// (it is kept, its progress thread still inside gloo).
TEST(GlooFailure, AbortFailsABlockedCollectiveWithAbortedError) {
  std::atomic<bool> done{false};
  with_gloo(
      2,
      [&](ProcessGroup& g) {
        if (g.rank() == 1) {
          wait_for(done);
          return;
        }
        std::vector<float> x(1 << 16);
        auto blocked = g.all_reduce(x.data(), static_cast<int64_t>(x.size()), DataType::kFloat32,
                                    ReduceOp::kSum);
        auto queued = g.barrier();
        std::thread aborter([&] {
          std::this_thread::sleep_for(200ms);
          g.abort("the coordinator said rank 1 died");
          EXPECT_TRUE(blocked->completed()) << "abort() returned with the collective still in gloo";
        });
        const std::string what = expect_error<AbortedError>(blocked);
        EXPECT_TRUE(contains(what, "the coordinator said rank 1 died")) << what;
        expect_error<AbortedError>(queued);
        aborter.join();
        done = true;
      },
      60s);
}

// An exception that escapes gloo's own device thread (gloo throws there when
// a control message meets a broken connection) used to end the process; it
// now fails the running collective at once as a PeerError naming the link
// (Note [gloo's device thread dies] in core/comm/gloo/device_thread.h), the
// group refuses later work, and destroying it returns (its gloo context is
// kept, not destroyed). The throw comes from the test seam; without the
// fix the collective would end at the 60 s timeout, a TimeoutError.
TEST(GlooFailure, AnExceptionOnGloosDeviceThreadFailsTheRunningCollective) {
  ::setenv("MDDP_TEST_GLOO_DEVICE_THROW", "0:2", 1);  // rank 0, as its collective #2 starts
  std::atomic<bool> done{false};
  with_gloo(
      2,
      [&](ProcessGroup& g) {
        std::vector<float> x(1 << 10, 1.0f);
        g.all_reduce(x.data(), static_cast<int64_t>(x.size()), DataType::kFloat32, ReduceOp::kSum)
            ->wait();
        EXPECT_EQ(x[0], 2.0f);
        if (g.rank() == 1) {
          wait_for(done);
          return;
        }
        const PeerError e = peer_error_of(g.all_reduce(x.data(), static_cast<int64_t>(x.size()),
                                                       DataType::kFloat32, ReduceOp::kSum));
        const std::string what = e.what();
        EXPECT_TRUE(
            contains(what, "rank 0: all_reduce(gloo ring) #2: gloo, with rank 1 at [127.0.0.1]:"))
            << what;
        EXPECT_TRUE(contains(what, "its device thread ended")) << what;
        EXPECT_EQ(e.peer(), 1) << what;
        EXPECT_EQ(e.fault(), PeerFault::kReset) << what;
        const std::string later = expect_error<PeerError>(g.barrier());
        EXPECT_TRUE(contains(later, "failed earlier")) << later;
        g.abort("the job failed");  // as the worker's verdict does: gloo is not touched
        done = true;
      },
      60s);
  ::unsetenv("MDDP_TEST_GLOO_DEVICE_THROW");
}

TEST(GlooSetup, AnAddressItCannotUseIsOneClearError) {
  MemoryStore store;
  try {
    connect_gloo(store, 0, 2, {1s, "no-such-host.invalid", "comm"});
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "no-such-host.invalid")) << e.what();
  }
}

TEST(GlooSetup, AMissingRankIsATimeoutNamingIt) {
  MemoryStore store;
  try {
    connect_gloo(store, 0, 2, {300ms, "127.0.0.1", "comm"});
    ADD_FAILURE() << "accepted";
  } catch (const TimeoutError& e) {
    EXPECT_TRUE(contains(e.what(), "comm/gloo/1")) << e.what();
  }
}

}  // namespace
}  // namespace mddp::comm::test

// Every Transport (tcp, shm) against the same contract: exact delivery
// between every pair for sizes 0, 1, 7 and 1e6+3, world sizes 1..8; a ring of
// 64 MiB send_recvs; deadlines, abort and frame validation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <thread>

#include "core/comm/memory_store.h"
#include "support/ranks.h"
#include "transport_fixture.h"

namespace mddp::comm::test {
namespace {

using mddp::test::run_threads;

const std::size_t kSizes[] = {0, 1, 7, 1'000'003};

struct Case {
  TransportKind kind;
  int size;
};

// Runs fn(rank, its transport) on every rank of an n-rank world of `kind`,
// as threads connected through one MemoryStore.
void with_transports(TransportKind kind, int n, const std::function<void(int rank, Transport&)>& fn,
                     std::chrono::seconds timeout = 60s) {
  MemoryStore store;
  run_threads(
      n,
      [&](int rank) {
        auto t = connect_rank(store, rank, n, kind);
        fn(rank, *t);
      },
      timeout);
}

// Runs fn on rank `actor`'s transport while the other ranks stay connected,
// and silent, until it returns.
void with_silent_peers(TransportKind kind, int n, int actor,
                       const std::function<void(Transport&)>& fn) {
  std::promise<void> done;
  auto done_future = done.get_future().share();
  with_transports(kind, n, [&](int rank, Transport& t) {
    if (rank == actor) {
      fn(t);
      done.set_value();
    } else {
      EXPECT_EQ(done_future.wait_for(30s), std::future_status::ready);
    }
  });
}

class ExchangeTest : public ::testing::TestWithParam<Case> {};

// Every ordered pair with send/recv: the pairs in one global order; in pair
// (i, j), i sends first and j receives first. Deadlock-free: the earliest
// unfinished pair always has both its ranks at it.
TEST_P(ExchangeTest, EveryPairSendRecvExactBytes) {
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().size;
  with_transports(
      kind, n,
      [&](int rank, Transport& t) {
        for (std::size_t bytes : kSizes)
          for (int i = 0; i < n; ++i)
            for (int j = i + 1; j < n; ++j) {
              if (rank != i && rank != j) continue;
              int peer = rank == i ? j : i;
              auto out = pattern(rank, peer, bytes);
              std::vector<uint8_t> got(bytes);
              if (rank == i) {
                t.send(peer, out.data(), bytes, in(30s));
                t.recv(peer, got.data(), bytes, in(30s));
              } else {
                t.recv(peer, got.data(), bytes, in(30s));
                t.send(peer, out.data(), bytes, in(30s));
              }
              EXPECT_TRUE(same_bytes(got, pattern(peer, rank, bytes)))
                  << rank << " <- " << peer << " " << bytes;
            }
      },
      120s);
}

// Round k: send to rank+k while receiving from rank-k, all ranks at once.
TEST_P(ExchangeTest, AllToAllSendRecvExactBytes) {
  const TransportKind kind = GetParam().kind;
  const int n = GetParam().size;
  with_transports(
      kind, n,
      [&](int rank, Transport& t) {
        for (std::size_t bytes : kSizes)
          for (int k = 1; k < n; ++k) {
            int to = (rank + k) % n, from = (rank - k + n) % n;
            auto out = pattern(rank, to, bytes, k);
            std::vector<uint8_t> got(bytes);
            t.send_recv(to, out.data(), bytes, from, got.data(), bytes, in(30s));
            EXPECT_TRUE(same_bytes(got, pattern(from, rank, bytes, k)))
                << rank << " <- " << from << " " << bytes;
          }
      },
      120s);
}

std::vector<Case> exchange_cases() {
  std::vector<Case> cases;
  for (auto kind : {TransportKind::kTcp, TransportKind::kShm})
    for (int n : {1, 2, 3, 4, 8}) cases.push_back({kind, n});
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Kinds, ExchangeTest, ::testing::ValuesIn(exchange_cases()),
                         [](const auto& info) {
                           return std::string(to_string(info.param.kind)) + "_" +
                                  std::to_string(info.param.size) + "ranks";
                         });

class TransportTest : public ::testing::TestWithParam<TransportKind> {};

// Both neighbours send 64 MiB at once: blocking send-then-recv would deadlock
// on full buffers; send_recv must drain while it sends.
TEST_P(TransportTest, RingOf64MiBSendRecvDoesNotDeadlock) {
  for (int n : {2, 4}) {
    const std::size_t bytes = 64u << 20;
    with_transports(
        GetParam(), n,
        [&](int rank, Transport& t) {
          int right = (rank + 1) % n, left = (rank + n - 1) % n;
          auto out = pattern(rank, right, bytes);
          std::vector<uint8_t> got(bytes);
          t.send_recv(right, out.data(), bytes, left, got.data(), bytes, in(60s));
          EXPECT_TRUE(same_bytes(got, pattern(left, rank, bytes)));
          // And the other way round, with the same peer on both sides for n = 2.
          out = pattern(rank, left, bytes, 1);
          t.send_recv(left, out.data(), bytes, right, got.data(), bytes, in(60s));
          EXPECT_TRUE(same_bytes(got, pattern(right, rank, bytes, 1)));
        },
        240s);
  }
}

TEST_P(TransportTest, WorldOfOneHasNoPeers) {
  MemoryStore store;
  auto t = connect_rank(store, 0, 1, GetParam());
  EXPECT_EQ(t->size(), 1);
  EXPECT_THROW(t->send(0, nullptr, 0, in(1s)), std::logic_error);
}

// The missing peer is named, and so is this rank.
TEST_P(TransportTest, TimeoutNamesThisRankAndTheMissingPeer) {
  with_silent_peers(GetParam(), 3, 1, [](Transport& t) {
    auto start = Clock::now();
    try {
      char byte;
      t.recv(2, &byte, 1, in(300ms));
      ADD_FAILURE() << "recv from a silent peer returned";
    } catch (const TimeoutError& e) {
      EXPECT_TRUE(contains(e.what(), "rank 1:")) << e.what();
      EXPECT_TRUE(contains(e.what(), "from rank 2")) << e.what();
    }
    EXPECT_GE(Clock::now() - start, 300ms);
    EXPECT_LT(Clock::now() - start, 10s);
    std::vector<uint8_t> big(64u << 20);  // larger than any buffer: the send must wait
    try {
      t.send(0, big.data(), big.size(), in(300ms));
      ADD_FAILURE() << "a 64 MiB send to a peer that never receives returned";
    } catch (const TimeoutError& e) {
      EXPECT_TRUE(contains(e.what(), "rank 1:")) << e.what();
      EXPECT_TRUE(contains(e.what(), "to rank 0")) << e.what();
    }
  });
}

TEST_P(TransportTest, AbortUnblocksARecvPromptlyWithTheReason) {
  with_silent_peers(GetParam(), 2, 0, [](Transport& t) {
    std::atomic<bool> aborting{false};
    Clock::time_point aborted_at;
    std::thread killer([&] {
      std::this_thread::sleep_for(100ms);
      aborted_at = Clock::now();
      aborting = true;
      t.abort("coordinator reports rank 3 dead");
    });
    std::vector<uint8_t> buf(1 << 20);
    try {
      t.recv(1, buf.data(), buf.size(), in(30s));
      ADD_FAILURE() << "recv returned";
    } catch (const AbortedError& e) {
      EXPECT_TRUE(aborting.load());
      EXPECT_LT(Clock::now() - aborted_at, 1s);
      EXPECT_TRUE(contains(e.what(), "coordinator reports rank 3 dead")) << e.what();
    }
    killer.join();
    EXPECT_THROW(t.recv(1, buf.data(), 1, in(30s)), AbortedError);  // and every later call
    t.abort("again");                                               // idempotent
  });
}

TEST_P(TransportTest, WrongFrameLengthIsAPeerErrorNamingBothLengths) {
  with_transports(GetParam(), 2, [](int rank, Transport& t) {
    std::vector<uint8_t> buf(16);
    if (rank == 0) {
      t.send(1, buf.data(), 8, in(30s));
    } else {
      try {
        t.recv(0, buf.data(), 16, in(30s));
        ADD_FAILURE() << "recv of the wrong length returned";
      } catch (const PeerError& e) {
        EXPECT_TRUE(contains(e.what(), "rank 0")) << e.what();
        EXPECT_TRUE(contains(e.what(), "8 bytes")) << e.what();
        EXPECT_TRUE(contains(e.what(), "16 bytes")) << e.what();
      }
    }
  });
}

TEST(ConnectTest, AutoPicksShmOnOneHostAndLeavesNothingInDevShm) {
  MemoryStore store;
  run_threads(
      3,
      [&](int rank) {
        auto t = connect_rank(store, rank, 3, TransportKind::kAuto);
        EXPECT_EQ(t->name(), "shm");
        // Every rank is attached, so every segment name is already unlinked.
        std::string name = store.get("comm/shm/seg/" + std::to_string(rank), 1s);
        EXPECT_NE(::access(("/dev/shm" + name).c_str(), F_OK), 0) << name << " still exists";
      },
      60s);
}

TEST(ConnectTest, AutoPicksTcpWhenHostsDiffer) {
  MemoryStore store;
  store.set("comm/host/1",
            "elsewhere/boot-id");  // rank 1 claims another host; only rank 0 runs here
  run_threads(
      2,
      [&](int rank) {
        if (rank == 0) {
          auto t = connect_transport(store, 0, 2, {"test-job", 0, "s3cret-key"},
                                     TransportKind::kAuto, 30s);
          EXPECT_EQ(t->name(), "tcp");
          char c = 0;
          t->send(1, &c, 1, in(30s));
        } else {  // rank 1 skips the host exchange (it already "published") and joins over tcp
                  // directly
          auto t = connect_transport(store, 1, 2, {"test-job", 0, "s3cret-key"},
                                     TransportKind::kTcp, 30s);
          char c = 1;
          t->recv(0, &c, 1, in(30s));
          EXPECT_EQ(c, 0);
        }
      },
      60s);
}

TEST_P(TransportTest, PeerThatClosesEndsAWaitingRecvWithPeerError) {
  MemoryStore store;
  run_threads(
      2,
      [&](int rank) {
        auto t = connect_rank(store, rank, 2, GetParam());
        if (rank == 1) {
          char c = 1;
          t->send(0, &c, 1, in(30s));
          t.reset();  // leaves: closes sockets / marks its segment closed
          return;
        }
        char c = 0;
        t->recv(1, &c, 1, in(30s));  // sent before the close: still delivered
        EXPECT_EQ(c, 1);
        auto start = Clock::now();
        try {
          t->recv(1, &c, 1, in(30s));
          ADD_FAILURE() << "recv from a closed peer returned";
        } catch (const PeerError& e) {
          EXPECT_TRUE(contains(e.what(), "rank 0:")) << e.what();
          EXPECT_TRUE(contains(e.what(), "rank 1")) << e.what();
        }
        EXPECT_LT(Clock::now() - start, 10s);
      },
      60s);
}

// The slow-link Lab's seam: a paced TCP link delivers no faster than its
// rate, and the bytes arrive whole; shared memory has no link to pace and
// says so. Timed by the sender from its send to the receiver's 1-byte
// answer (the answer's way back is not paced), which the bytes must have
// crossed first: a lower bound that no scheduling delay can shorten.
TEST(LinkRate, APacedTcpLinkIsNoFasterThanItsRate) {
  const std::size_t bytes = 4u << 20;
  const double rate = 20e6;  // 4 MiB: at least 0.2 s
  with_transports(
      TransportKind::kTcp, 2,
      [&](int rank, Transport& t) {
        char answer = 0;
        if (rank == 0) {
          t.limit_send_rate(1, rate);
          const auto out = pattern(0, 1, bytes);
          const auto start = Clock::now();
          t.send(1, out.data(), bytes, in(60s));
          t.recv(1, &answer, 1, in(60s));
          const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
          EXPECT_GE(seconds, 0.75 * static_cast<double>(bytes) / rate) << "not paced";
          return;
        }
        std::vector<uint8_t> got(bytes);
        t.recv(0, got.data(), bytes, in(60s));
        EXPECT_TRUE(same_bytes(got, pattern(0, 1, bytes)));
        t.send(0, &answer, 1, in(60s));
      },
      120s);
  with_transports(
      TransportKind::kShm, 2,
      [&](int rank, Transport& t) {
        try {
          t.limit_send_rate(1 - rank, rate);
          ADD_FAILURE() << "shm paced a link";
        } catch (const InputError& e) {
          EXPECT_TRUE(contains(e.what(), "use --transport tcp")) << e.what();
        }
      },
      60s);
}

INSTANTIATE_TEST_SUITE_P(Kinds, TransportTest,
                         ::testing::Values(TransportKind::kTcp, TransportKind::kShm), kind_name);

}  // namespace
}  // namespace mddp::comm::test

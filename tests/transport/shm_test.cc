// Shared-memory specifics: messages far larger than the ring stream through
// it (wrap-around at every offset), the ring and single-copy paths deliver
// the same bytes, and no segment is left in /dev/shm when a rank is missing;
// a segment another process made first, one with permissions for others,
// or one made without the attempt's key is refused
// (Note [Segments nobody else can use]).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "core/comm/memory_store.h"
#include "core/comm/transport/shm/shm_transport.h"
#include "support/ranks.h"
#include "transport_fixture.h"

namespace mddp::comm::test {
namespace {

using mddp::test::run_threads;

std::unique_ptr<ShmTransport> connect_shm(Store& store, int rank, int size, ShmOptions options,
                                          std::chrono::milliseconds timeout = 30s) {
  return ShmTransport::connect(store, rank, size, {"test-job", 0, "s3cret-key"}, timeout, "comm",
                               options);
}

const std::string kTag(shm::kSegmentTagBytes, 't');

struct Config {
  const char* name;
  ShmOptions options;
};

class ShmPathTest : public ::testing::TestWithParam<Config> {};

TEST_P(ShmPathTest, AllToAllExactBytesAtAwkwardSizes) {
  MemoryStore store;
  const std::size_t sizes[] = {0, 1, 7, 15, 16, 17, 4095, 4096, 4097, 65537, 1'000'003};
  run_threads(
      3,
      [&](int rank) {
        auto t = connect_shm(store, rank, 3, GetParam().options);
        for (int round = 0; round < 2; ++round)
          for (std::size_t bytes : sizes)
            for (int k = 1; k < 3; ++k) {
              int to = (rank + k) % 3, from = (rank - k + 3) % 3;
              auto out = pattern(rank, to, bytes, round);
              std::vector<uint8_t> got(bytes);
              t->send_recv(to, out.data(), bytes, from, got.data(), bytes, in(30s));
              EXPECT_TRUE(same_bytes(got, pattern(from, rank, bytes, round)))
                  << from << "->" << rank << " " << bytes;
            }
      },
      120s);
}

TEST_P(ShmPathTest, RingOf64MiBBothWays) {
  MemoryStore store;
  const std::size_t bytes = 64u << 20;
  run_threads(
      2,
      [&](int rank) {
        auto t = connect_shm(store, rank, 2, GetParam().options);
        auto out = pattern(rank, 1 - rank, bytes);
        std::vector<uint8_t> got(bytes);
        t->send_recv(1 - rank, out.data(), bytes, 1 - rank, got.data(), bytes, in(60s));
        EXPECT_TRUE(same_bytes(got, pattern(1 - rank, rank, bytes)));
      },
      120s);
}

INSTANTIATE_TEST_SUITE_P(Paths, ShmPathTest,
                         ::testing::Values(Config{"tiny_ring", {4096, 0}},
                                           Config{"ring_only", {1 << 20, 0}},
                                           Config{"single_copy", {1 << 20, 4096}}),
                         [](const auto& info) { return info.param.name; });

// (A 2 s timeout: a rank that starts later than its peer by more than it
// finds the peer's segment already gone, as under ThreadSanitizer.)
TEST(ShmTest, NoSegmentLeftWhenARankNeverArrives) {
  MemoryStore store;
  run_threads(
      2,
      [&](int rank) {
        EXPECT_THROW(connect_shm(store, rank, 3, {}, 2s), TimeoutError);
        std::string name = store.get("comm/shm/seg/" + std::to_string(rank), 1s);
        EXPECT_NE(::access(("/dev/shm" + name).c_str(), F_OK), 0) << name << " was left behind";
      },
      60s);
}

// Note [Orphaned segments]: a creator killed before it unlinked its name
// leaves it in /dev/shm; remove_orphans() takes out those of dead creators
// only, never a live process's, nor a name of another form.
TEST(ShmTest, OrphanedSegmentsOfDeadCreatorsAreRemovedOthersKept) {
  auto exists = [](const std::string& name) {
    return ::access(("/dev/shm" + name).c_str(), F_OK) == 0;
  };
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // creates a segment, says its name, waits to be killed
    auto seg = shm::Segment::create(shm::Segment::make_name(42, 0), 0, 2, 42, 4096, 0, kTag);
    const std::string name = seg.name();
    [[maybe_unused]] auto n = ::write(pipe_fds[1], name.data(), name.size());
    for (;;) ::pause();
  }
  ::close(pipe_fds[1]);
  char buf[256] = {};
  const auto n = ::read(pipe_fds[0], buf, sizeof buf - 1);
  ::close(pipe_fds[0]);
  const std::string orphan(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
  // Checked while its creator lives: once it is dead, a test process beside
  // this one that sets up shared memory may reclaim it first.
  const bool made = !orphan.empty() && exists(orphan);
  ::kill(child, SIGKILL);  // no chance to unlink
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_TRUE(made) << "'" << orphan << "': the creator did not make it";

  auto live =
      shm::Segment::create(shm::Segment::make_name(42, 1), 1, 2, 42, 4096, 0, kTag);  // ours: alive
  const std::string foreign = "/mddp-not-one-of-ours";
  const int fd = ::shm_open(foreign.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);

  // Not the count: a test process beside this one that sets up shared
  // memory reclaims dead creators' segments too, and may get there first.
  shm::Segment::remove_orphans();
  EXPECT_FALSE(exists(orphan)) << orphan;
  EXPECT_TRUE(exists(live.name())) << "a live creator's segment is kept";
  EXPECT_TRUE(exists(foreign)) << "a name of another form is kept";
  ::shm_unlink(foreign.c_str());
}

// A name someone created before the rank could: refused, never used.
TEST(ShmTest, APreCreatedSegmentIsRefused) {
  const std::string name = shm::Segment::make_name(42, 0);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  try {
    shm::Segment::create(name, 0, 2, 42, 4096, 0, kTag);
    ADD_FAILURE() << "a pre-created segment was used";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "exists already: refused")) << e.what();
  }
  ::shm_unlink(name.c_str());
}

TEST(ShmTest, ASegmentOthersMayOpenIsRefused) {
  auto seg = shm::Segment::create(shm::Segment::make_name(42, 0), 0, 2, 42, 4096, 0, kTag);
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm" + seg.name()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "created with permissions for others";
  ASSERT_EQ(::chmod(("/dev/shm" + seg.name()).c_str(), 0644), 0);
  try {
    shm::Segment::attach(seg.name(), 0, 2, 42, kTag);
    ADD_FAILURE() << "a segment readable by others was attached";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "mode 644")) << e.what();
  }
}

TEST(ShmTest, ASegmentWithoutTheAttemptsTagIsRefused) {
  auto seg = shm::Segment::create(shm::Segment::make_name(42, 0), 0, 2, 42, 4096, 0, kTag);
  EXPECT_NO_THROW(shm::Segment::attach(seg.name(), 0, 2, 42, kTag));
  try {
    shm::Segment::attach(seg.name(), 0, 2, 42, std::string(shm::kSegmentTagBytes, 'u'));
    ADD_FAILURE() << "a segment with another tag was attached";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "does not carry the tag")) << e.what();
  }
}

// Ranks of two attempts of one job (another key each) never share a data plane.
TEST(ShmTest, RanksOfAnotherAttemptAreRefused) {
  MemoryStore store;
  std::atomic<int> refused{0};
  run_threads(
      2,
      [&](int rank) {
        const JobIdentity job{"test-job", rank, str("key-of-attempt-", rank)};
        try {
          ShmTransport::connect(store, rank, 2, job, 2s, "comm", {});
          ADD_FAILURE() << "rank " << rank << " connected across attempts";
        } catch (const CommError& e) {
          // Each refuses the other's segment (or times out once the other gave up).
          if (contains(e.what(), "does not carry the tag")) ++refused;
        }
      },
      60s);
  EXPECT_GE(refused.load(), 1);
}

}  // namespace
}  // namespace mddp::comm::test

// Health without gRPC: heartbeat timeouts, leaves and the roll call text.
#include "coordinator/health.h"

#include <gtest/gtest.h>

#include "coordinator/job_state.h"
#include "service/test_clock.h"

namespace mddp::coordinator {
namespace {

using namespace std::chrono_literals;

Progress at(int64_t step, const std::string& phase) {
  Progress p;
  p.step = step;
  p.phase = phase;
  p.collective_entered = p.collective_completed = 1041;
  p.op = "all_reduce";
  return p;
}

Progress in_all_reduce(int64_t seq, int bucket) {
  Progress p = at(1042, "backward");
  p.collective_entered = seq;
  p.collective_completed = seq - 1;
  p.bucket = bucket;
  return p;
}

// Four ranks on hosts a, b, c, d, started at t0; heartbeat every 1 s, timeout 10 s.
struct FourRanks : Health {
  FourRanks() : Health(Health::Options{1000ms, 10000ms}) { start({"a", "b", "c", "d"}, t0); }
};

TEST(Health, RollCallGroupsRanksByWhereTheyAre) {
  FourRanks h;
  h.heartbeat(0, in_all_reduce(1042, 7), t0 + 100ms);
  h.heartbeat(1, at(1042, "forward"), t0 + 100ms);
  h.heartbeat(2, in_all_reduce(1042, 7), t0 + 100ms);
  h.heartbeat(3, in_all_reduce(1042, 7), t0 + 100ms);
  EXPECT_EQ(h.roll_call(t0 + 1s),
            "ranks 0, 2, 3 wait in all_reduce #1042 (bucket 7); rank 1 was last seen in forward of "
            "step 1042");
}

TEST(Health, RollCallAfterTwoQuietPeriodsThenEveryTen) {
  FourRanks h;
  for (int r = 0; r < 4; ++r) h.heartbeat(r, at(5, "forward"), t0);
  EXPECT_FALSE(h.check(t0 + 1s).roll_call);
  // Heartbeats keep coming, but nobody moves.
  for (int r = 0; r < 4; ++r) h.heartbeat(r, at(5, "forward"), t0 + 2s);
  auto c = h.check(t0 + 2100ms);
  ASSERT_TRUE(c.roll_call);
  EXPECT_EQ(*c.roll_call,
            "no progress for 2.1 s: ranks 0, 1, 2, 3 were last seen in forward of step 5");
  EXPECT_FALSE(c.failure);
  EXPECT_FALSE(h.check(t0 + 3s).roll_call) << "not repeated every tick";
  EXPECT_TRUE(h.check(t0 + 12100ms).roll_call) << "repeated after 10 periods";
  // Progress resets the stall.
  h.heartbeat(2, at(6, "data"), t0 + 12200ms);
  EXPECT_FALSE(h.check(t0 + 13s).roll_call);
}

TEST(Health, RollCallShowsSilentRanksAndLeftRanks) {
  FourRanks h;
  h.heartbeat(0, at(3, "optimizer"), t0 + 4s);
  h.heartbeat(1, at(3, "optimizer"), t0 + 1s);
  h.leave(2, true, "", t0 + 1s);
  h.leave(3, true, "", t0 + 1s);
  EXPECT_EQ(h.roll_call(t0 + 4s),
            "rank 0 was last seen in optimizer of step 3; rank 1 was last seen in optimizer of "
            "step 3 (last heartbeat "
            "3.0 s ago); ranks 2, 3 have left");
}

TEST(Health, SilentRankFailsTheJobNamingRankHostAndPlace) {
  FourRanks h;
  for (int r = 0; r < 4; ++r) h.heartbeat(r, at(1042, "forward"), t0 + 1s);
  for (int s = 2; s <= 12; ++s)
    for (int r : {0, 2, 3}) h.heartbeat(r, at(1042, "forward"), t0 + std::chrono::seconds(s));
  EXPECT_FALSE(h.check(t0 + 11s).failure) << "10 s is not past the timeout yet";
  auto c = h.check(t0 + 11100ms);
  ASSERT_TRUE(c.failure);
  EXPECT_EQ(c.failure->rank, 1);
  EXPECT_NE(c.failure->message.find(
                "rank 1 (host b) stopped sending heartbeats: the last came 10.1 s ago (timeout "
                "10.0 s), in forward of step 1042"),
            std::string::npos)
      << c.failure->message;
  EXPECT_NE(c.failure->message.find("--heartbeat-timeout-ms"), std::string::npos);
  EXPECT_FALSE(h.check(t0 + 12s).failure) << "reported once";
}

TEST(Health, LeftRanksAreNotExpectedToBeat) {
  FourRanks h;
  for (int r = 0; r < 4; ++r) {
    auto l = h.leave(r, true, "", t0 + 1s);
    EXPECT_FALSE(l.failure);
    EXPECT_EQ(l.all_left, r == 3);
    EXPECT_EQ(l.all_ok, r == 3);
  }
  auto c = h.check(t0 + 1h);
  EXPECT_FALSE(c.failure);
  EXPECT_FALSE(c.roll_call);
}

TEST(Health, LeavingWithAFailureNamesTheRank) {
  FourRanks h;
  auto l = h.leave(2, false, "CommError: peer 3 closed the connection", t0 + 1s);
  ASSERT_TRUE(l.failure);
  EXPECT_EQ(l.failure->rank, 2);
  EXPECT_EQ(l.failure->message, "rank 2 (host c) failed: CommError: peer 3 closed the connection");
  EXPECT_FALSE(l.all_ok);
  EXPECT_FALSE(h.leave(2, false, "again", t0 + 2s).failure) << "a rank leaves once";
}

// Note [Who is at fault]: the same four ranks, with pids, in training.
struct Training : Health {
  Training() : Health(Health::Options{1000ms, 10000ms}) {
    start({"a", "b", "c", "d"}, t0, {1000, 1001, 1002, 1003});
    for (int r = 0; r < 4; ++r) heartbeat(r, at(5, "forward"), t0 + 100ms);
  }
};
using comm::PeerFault;

TEST(Health, ADisconnectedRankAPeerLostTooDiedAtOnce) {
  Training h;
  h.disconnected(2, t0 + 1s);
  EXPECT_FALSE(h.check(t0 + 1s).failure) << "alone, a closed stream may be a dropped connection";
  h.peer_fault(1, 2, PeerFault::kClosed, "rank 1: connection to rank 2: closed", t0 + 1010ms);
  auto c = h.check(t0 + 1020ms);
  ASSERT_TRUE(c.failure);
  EXPECT_EQ(c.failure->cause, Cause::kProcessDied);
  EXPECT_EQ(c.failure->rank, 2);
  EXPECT_EQ(c.failure->failed_rank(), 2);
  EXPECT_EQ(c.failure->host, "c");
  EXPECT_EQ(c.failure->pid, 1002);
  EXPECT_EQ(c.failure->doing, "forward of step 5");
  EXPECT_EQ(c.failure->message.rfind(
                "rank 2 (host c, pid 1002) died (last seen in forward of step 5)", 0),
            0u)
      << c.failure->message;
  EXPECT_NE(c.failure->message.find("rank 1 lost its data-plane connection to it"),
            std::string::npos)
      << c.failure->message;
  EXPECT_TRUE(h.ranks()[2].left) << "a dead rank is not waited for";
  EXPECT_FALSE(h.check(t0 + 1030ms).failure) << "reported once";
}

TEST(Health, ADisconnectedRankThatStaysAwayDiedAfterTheGrace) {
  Training h;
  h.disconnected(3, t0 + 1s);
  EXPECT_FALSE(h.check(t0 + 1900ms).failure);
  auto c = h.check(t0 + 2s);
  ASSERT_TRUE(c.failure);
  EXPECT_EQ(c.failure->cause, Cause::kProcessDied);
  EXPECT_NE(c.failure->message.find("did not come back within 1.0 s"), std::string::npos)
      << c.failure->message;
}

TEST(Health, AConnectionThatComesBackIsNoDeath) {
  Training h;
  h.disconnected(3, t0 + 1s);
  EXPECT_EQ(h.connected(3, t0 + 1300ms), 300ms);
  for (int r = 0; r < 4; ++r) h.heartbeat(r, at(6, "forward"), t0 + 2s);
  EXPECT_FALSE(h.check(t0 + 5s).failure);
}

TEST(Health, APeerOnTheSameHostSawTheProcessExit) {
  Training h;
  h.peer_fault(0, 1, PeerFault::kDied, "rank 0: shared memory with rank 1: died", t0 + 1s);
  auto c = h.check(t0 + 1s);
  ASSERT_TRUE(c.failure);
  EXPECT_EQ(c.failure->cause, Cause::kProcessDied);
  EXPECT_EQ(c.failure->rank, 1);
  EXPECT_NE(c.failure->message.find("rank 0 on its host saw its process exit"), std::string::npos)
      << c.failure->message;
}

TEST(Health, ALinkBothLiveEndsLostIsANetworkFault) {
  Training h;
  h.peer_fault(3, 1, PeerFault::kReset, "rank 3: connection to rank 1: reset", t0 + 1s);
  EXPECT_FALSE(h.check(t0 + 1s).failure) << "rank 1 has not shown it is alive yet";
  h.peer_fault(1, 3, PeerFault::kReset, "rank 1: connection to rank 3: reset", t0 + 1s);
  auto c = h.check(t0 + 1s);
  ASSERT_TRUE(c.failure);
  EXPECT_EQ(c.failure->cause, Cause::kLinkBroken);
  EXPECT_EQ(c.failure->rank, 1);
  EXPECT_EQ(c.failure->peer, 3);
  EXPECT_EQ(c.failure->failed_rank(), -1) << "no single rank is at fault";
  EXPECT_EQ(c.failure->message.rfind(
                "the data-plane connection between rank 1 (host b) and rank 3 (host d) broke while "
                "both ranks were alive: a network fault, not a lost rank (rank 3 saw: rank 3: "
                "connection to rank 1: reset)",
                0),
            0u)
      << c.failure->message;
}

TEST(Health, AOneSidedReportNeedsTwoHeartbeatsOfThePeer) {
  Training h;
  h.peer_fault(0, 2, PeerFault::kReset, "rank 0: connection to rank 2: reset", t0 + 1s);
  h.heartbeat(2, at(5, "sync"), t0 + 1100ms);  // may have been on its way before the report
  EXPECT_FALSE(h.check(t0 + 1100ms).failure);
  h.heartbeat(2, at(5, "sync"), t0 + 2100ms);  // sent after the first was answered: alive
  auto c = h.check(t0 + 2100ms);
  ASSERT_TRUE(c.failure);
  EXPECT_EQ(c.failure->cause, Cause::kLinkBroken);
}

TEST(Health, AReportedPeerThatDisconnectsDied) {
  Training h;
  h.peer_fault(0, 2, PeerFault::kReset, "rank 0: connection to rank 2: reset", t0 + 1s);
  h.heartbeat(2, at(5, "sync"), t0 + 1100ms);
  h.disconnected(2, t0 + 1150ms);
  h.heartbeat(2, at(5, "sync"), t0 + 1200ms);  // a heartbeat in flight when it died
  auto c = h.check(t0 + 1200ms);
  ASSERT_TRUE(c.failure);
  EXPECT_EQ(c.failure->cause, Cause::kProcessDied) << c.failure->message;
  EXPECT_EQ(c.failure->rank, 2);
}

TEST(Health, ReportsAboutARankThatLeftDoNotCount) {
  Training h;
  h.leave(2, false, "out of memory", t0 + 1s);
  h.peer_fault(0, 2, PeerFault::kClosed, "rank 0: connection to rank 2: closed", t0 + 1100ms);
  h.peer_fault(2, 0, PeerFault::kClosed, "rank 2: connection to rank 0: closed", t0 + 1100ms);
  EXPECT_FALSE(h.check(t0 + 1200ms).failure);
}

TEST(Health, ForgiveRestartsTheSilenceClocks) {
  Training h;
  EXPECT_FALSE(h.check(t0 + 9s).failure);
  h.forgive(t0 + 9s);  // the coordinator did not run until now
  EXPECT_FALSE(h.check(t0 + 11s).failure) << "the ranks' silence while it was stopped is forgiven";
  auto c = h.check(t0 + 19100ms);
  ASSERT_TRUE(c.failure);
  EXPECT_EQ(c.failure->cause, Cause::kHeartbeatTimeout);
}

TEST(Health, DescribeSaysWhereTheRankWas) {
  EXPECT_EQ(describe(Progress{}), "setup");
  EXPECT_EQ(describe(at(204, "backward")), "backward of step 204");
  EXPECT_EQ(describe(in_all_reduce(1042, 7)),
            "backward of step 1042, in all_reduce #1042 of bucket 7");
}

TEST(JobState, FirstFailureWinsAndTerminalIsFinal) {
  JobState s;
  EXPECT_EQ(s.status().state, State::kForming);
  EXPECT_FALSE(s.succeed()) << "not from forming";
  s.set_running();
  EXPECT_EQ(s.status().state, State::kRunning);
  EXPECT_TRUE(s.fail({.cause = Cause::kRankError,
                      .rank = 1,
                      .host = "b",
                      .message = "rank 1 (host b) failed: x"}));
  EXPECT_FALSE(s.fail({.cause = Cause::kRankError,
                       .rank = 2,
                       .host = "c",
                       .message = "rank 2 (host c) failed: echo of rank 1"}));
  EXPECT_FALSE(s.succeed());
  EXPECT_EQ(s.status().failed_rank(), 1);
  EXPECT_EQ(s.status().verdict.cause, Cause::kRankError);
  EXPECT_EQ(s.status().failure(), "rank 1 (host b) failed: x");
  EXPECT_EQ(s.wait_terminal(Clock::now()).state, State::kFailed);

  JobState ok;
  ok.set_running();
  EXPECT_TRUE(ok.succeed());
  EXPECT_FALSE(ok.fail({.cause = Cause::kShutdown, .message = "late"}));
  EXPECT_EQ(ok.status().state, State::kSucceeded);
}

}  // namespace
}  // namespace mddp::coordinator

// What `microddp run` decides about its children (cli/run_policy.h), tick
// by tick without a process: which worker is started again and how often,
// when the others are stopped and in what order, and the exit status of
// the whole run.
#include "cli/run_policy.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "control/exit_status.h"

namespace mddp::cli {
namespace {

using namespace std::chrono_literals;

const RunClock::time_point t0{};

ChildState running() {
  return {};
}
ChildState ended(int status) {
  return {true, status};
}

RunPolicyOptions options(int max_restarts = 0, bool elastic = false,
                         RunClock::duration linger = 0s) {
  return {.max_restarts = max_restarts, .elastic = elastic, .grace = 10s, .linger = linger};
}

TEST(RunPolicy, AllRunningDoesNothing) {
  RunPolicy p(2, options(3));
  const RunActions a = p.tick({running(), running(), running()}, false, t0);
  EXPECT_TRUE(a.restart.empty());
  EXPECT_FALSE(a.stop_workers || a.stop_all || a.kill_all || a.say_linger);
}

TEST(RunPolicy, AWorkerThatDiedOrLeftItsAttemptStartsAgainWhileRestartsLast) {
  RunPolicy p(2, options(2));
  // Rank 0 killed by SIGKILL, rank 1 left its ended attempt.
  RunActions a = p.tick({running(), ended(128 + SIGKILL), ended(control::kExitRestart)}, false, t0);
  EXPECT_EQ(a.restart, (std::vector<int>{1, 2}));
  EXPECT_FALSE(a.stop_workers) << "a restarted worker is running again: nothing failed";
  EXPECT_EQ(p.restarts(1), 1);
  a = p.tick({running(), ended(128 + SIGKILL), running()}, false, t0 + 1s);
  EXPECT_EQ(a.restart, (std::vector<int>{1}));
  EXPECT_EQ(p.restarts(1), 2);
  // The budget is spent: rank 0's next death fails the job.
  a = p.tick({running(), ended(128 + SIGKILL), running()}, false, t0 + 2s);
  EXPECT_TRUE(a.restart.empty());
  EXPECT_FALSE(a.stop_workers) << "the others get the grace time first";
}

TEST(RunPolicy, AWorkerThatFailedOnItsOwnIsNotRestarted) {
  RunPolicy p(2, options(5));
  EXPECT_TRUE(p.tick({running(), ended(1), running()}, false, t0).restart.empty());
}

TEST(RunPolicy, NothingIsRestartedOnceTheCoordinatorEnded) {
  RunPolicy p(1, options(5));
  EXPECT_TRUE(p.tick({ended(1), ended(control::kExitRestart)}, false, t0).restart.empty());
}

TEST(RunPolicy, AFailureStopsTheWorkersAfterTheGraceThenAllThenKills) {
  RunPolicy p(2, options());
  const std::vector<ChildState> failed = {running(), ended(1), running()};
  EXPECT_FALSE(p.tick(failed, false, t0).stop_workers);
  EXPECT_FALSE(p.tick(failed, false, t0 + 9s).stop_workers);
  EXPECT_TRUE(p.tick(failed, false, t0 + 10s).stop_workers);
  EXPECT_FALSE(p.tick(failed, false, t0 + 11s).stop_workers) << "once";
  // The workers are still there 5 s after their SIGTERM: every child gets one.
  EXPECT_FALSE(p.tick(failed, false, t0 + 14s).stop_all);
  EXPECT_TRUE(p.tick(failed, false, t0 + 15s).stop_all);
  // 3 s later, what is left is killed.
  EXPECT_FALSE(p.tick(failed, false, t0 + 17s).kill_all);
  EXPECT_TRUE(p.tick(failed, false, t0 + 18s).kill_all);
}

TEST(RunPolicy, WithNoWorkerLeftTheCoordinatorIsStoppedWithThem) {
  RunPolicy p(1, options());
  EXPECT_FALSE(p.tick({running(), ended(1)}, false, t0).stop_workers);
  const RunActions a = p.tick({running(), ended(1)}, false, t0 + 10s);
  EXPECT_TRUE(a.stop_workers);
  EXPECT_TRUE(a.stop_all) << "no worker runs: nothing to wait for";
}

TEST(RunPolicy, AnInterruptionStopsTheWorkersAtOnce) {
  RunPolicy p(2, options(3, false, 60s));
  const RunActions a = p.tick({running(), running(), running()}, true, t0);
  EXPECT_TRUE(a.stop_workers);
  EXPECT_TRUE(p.tick({running(), ended(143), ended(143)}, true, t0 + 1s).stop_all)
      << "interrupted, the coordinator does not linger";
}

TEST(RunPolicy, TheCoordinatorLingersAfterTheWorkersWhenAsked) {
  RunPolicy p(1, options(0, false, 30s));
  RunActions a = p.tick({running(), ended(0)}, false, t0);
  EXPECT_TRUE(a.say_linger);
  EXPECT_FALSE(a.stop_workers) << "a job that succeeded stops nobody";
  EXPECT_FALSE(p.tick({running(), ended(0)}, false, t0 + 1s).say_linger) << "said once";
}

TEST(RunPolicy, ElasticLeavesALostWorkerToTheCoordinator) {
  RunPolicy p(2, options(0, true));
  EXPECT_FALSE(p.tick({running(), ended(1), running()}, false, t0 + 60s).stop_workers)
      << "the coordinator re-forms the job without it, or fails it";
  EXPECT_FALSE(p.tick({running(), ended(1), running()}, false, t0 + 61s).stop_workers);
  RunPolicy q(2, options(0, true));
  EXPECT_FALSE(q.tick({ended(1), ended(1), running()}, false, t0).stop_workers);
  EXPECT_TRUE(q.tick({ended(1), ended(1), running()}, false, t0 + 10s).stop_workers)
      << "once the coordinator failed, the job did";
}

// --on-failure shrink: the others went on without a worker that died, so it
// is not started again (it could not join them), while one that left an
// attempt that ended for another reason (exit 75) still is.
TEST(RunPolicy, ShrinkStartsNoDeadWorkerAgain) {
  RunPolicyOptions o = options(2, true);
  o.shrink = true;
  RunPolicy p(2, o);
  RunActions a = p.tick({running(), ended(128 + SIGKILL), ended(control::kExitRestart)}, false, t0);
  EXPECT_EQ(a.restart, (std::vector<int>{2}));
  EXPECT_FALSE(a.stop_workers) << "the coordinator decides about the dead one";
}

// A worker the elastic job went on without may hang on (stopped, hung):
// once the coordinator ended, it gets the grace, then it is stopped.
TEST(RunPolicy, ElasticStopsAWorkerLeftBehindOnceTheCoordinatorEnded) {
  RunPolicy p(2, options(0, true));
  EXPECT_FALSE(p.tick({ended(0), ended(0), running()}, false, t0).stop_workers);
  EXPECT_TRUE(p.tick({ended(0), ended(0), running()}, false, t0 + 10s).stop_workers);
  EXPECT_TRUE(p.tick({ended(0), ended(0), running()}, false, t0 + 15s).stop_all);
  EXPECT_TRUE(p.tick({ended(0), ended(0), running()}, false, t0 + 18s).kill_all);
}

TEST(RunPolicy, RecordsLostIsNoFailureToStopFor) {
  RunPolicy p(2, options());
  EXPECT_FALSE(p.tick({running(), ended(control::kExitRecordsLost), running()}, false, t0 + 60s)
                   .stop_workers);
}

TEST(RunOutcome, SaysHowTheRunEndsAndItsExitStatus) {
  RunOutcome o = run_outcome({ended(0), ended(0), ended(0)}, false, 0);
  EXPECT_EQ(o.end, RunOutcome::End::kSucceeded);
  EXPECT_EQ(o.exit_code(), 0);

  o = run_outcome({ended(1), ended(0), ended(128 + SIGKILL)}, false, 0);
  EXPECT_EQ(o.end, RunOutcome::End::kFailed);
  EXPECT_EQ(o.failed, (std::vector<int>{0, 2}));
  EXPECT_EQ(o.exit_code(), 1);

  o = run_outcome({ended(0), ended(control::kExitRecordsLost), ended(0)}, false, 0);
  EXPECT_EQ(o.end, RunOutcome::End::kRecordsLost);
  EXPECT_EQ(o.lost, (std::vector<int>{1}));
  EXPECT_EQ(o.exit_code(), control::kExitRecordsLost);

  o = run_outcome({ended(0), ended(0), ended(128 + SIGKILL)}, true, 0);
  EXPECT_EQ(o.end, RunOutcome::End::kSucceeded) << "elastic: it finished without rank 1";
  EXPECT_EQ(o.gone, (std::vector<int>{2}));

  o = run_outcome({ended(1), ended(0), ended(128 + SIGKILL)}, true, 0);
  EXPECT_EQ(o.end, RunOutcome::End::kFailed) << "elastic, but the coordinator failed the job";

  o = run_outcome({ended(143), ended(143)}, false, SIGTERM);
  EXPECT_EQ(o.end, RunOutcome::End::kInterrupted);
  EXPECT_EQ(o.exit_code(), 128 + SIGTERM);
}

}  // namespace
}  // namespace mddp::cli

// Job: the state classes together, still without gRPC.
#include "coordinator/job.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "control/proof.h"
#include "core/common/hmac.h"
#include "support/ranks.h"

namespace mddp::coordinator {
namespace {

using namespace std::chrono_literals;

JobOptions job_options(int n) {
  JobOptions o;
  // std::string values, not literals: gcc 12's -Wrestrict misreads the
  // inlined assignment of a short literal at -O3 (its bug 105329).
  o.job_id = std::string("j");
  o.token = std::string("t");
  o.world_size = n;
  o.config_json = R"({"batch": 8})";
  o.heartbeat_interval = 100ms;
  o.heartbeat_timeout = 1000ms;
  o.rendezvous_timeout = 5s;
  return o;
}

// Worker i's join, proven with the job's token over a fresh Hello nonce.
JoinRequest worker(Job& job, int i) {
  JoinRequest r;
  r.job_id = "j";
  r.protocol_version = kProtocolVersion;
  r.host = "host" + std::to_string(i);
  r.pid = 1000 + i;
  r.server_nonce = job.hello("j", kProtocolVersion, "test", Clock::now()).server_nonce;
  r.client_nonce = random_bytes(kNonceBytes);
  r.proof = join_proof("t", r.job_id, r.server_nonce, r.client_nonce, r.host, r.pid);
  return r;
}

// Joins n workers at `now`; returns their sessions by rank (and their
// attempt and its nonce, when asked).
std::vector<std::string> form(Job& job, int n, TimePoint now, JoinResult* last = nullptr) {
  std::vector<std::string> sessions(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    job.join(worker(job, i), now + 1h, now, [&](JoinResult r) {
      ASSERT_TRUE(r.outcome.ok()) << r.outcome.message;
      sessions[static_cast<std::size_t>(r.self.rank)] = r.self.session;
      if (last) *last = r;
    });
  return sessions;
}

TEST(Job, RunsToSuccessWhenEveryRankLeavesOk) {
  Job job(job_options(2));
  const TimePoint t0 = Clock::now();
  EXPECT_EQ(job.status().state, State::kForming);
  auto s = form(job, 2, t0);
  EXPECT_EQ(job.status().state, State::kRunning);
  EXPECT_TRUE(job.set(s[0], "comm/addr/0", "a:1").ok());
  std::optional<std::string> got;
  job.get(s[1], "comm/addr/0", t0 + 1s, t0, [&](Outcome o, std::string v) {
    EXPECT_TRUE(o.ok());
    got = v;
  });
  EXPECT_EQ(got, "a:1");
  auto hb = job.heartbeat(s[1], Progress{}, t0 + 50ms);
  EXPECT_TRUE(hb.outcome.ok());
  EXPECT_EQ(hb.rank, 1);
  EXPECT_EQ(hb.status.state, State::kRunning);
  MetricsRecord rec;
  rec.metrics.rank = 7;  // ignored: the session says who sent it
  auto m = job.metrics(s[1], 0, {rec});
  EXPECT_TRUE(m.outcome.ok());
  EXPECT_EQ(job.metrics_log().since(0, 10).at(0).metrics.rank, 1);
  EXPECT_EQ(job.leave(s[0], true, "", t0 + 60ms).status.state, State::kRunning);
  EXPECT_FALSE(job.finished());
  EXPECT_EQ(job.leave(s[1], true, "", t0 + 70ms).status.state, State::kSucceeded);
  job.tick(t0 + 80ms);
  EXPECT_TRUE(job.finished());
}

// Every worker says Hello before any of them joins: past the flood bound
// of 4,096 nonces, no worker's nonce may be pushed out by the others'.
TEST(Job, EveryWorkerOfALargeJobMayHoldAHelloNonceAtOnce) {
  const int n = 5000;
  Job job(job_options(n));
  const TimePoint t0 = Clock::now();
  std::vector<JoinRequest> joins;
  for (int i = 0; i < n; ++i) joins.push_back(worker(job, i));  // every Hello first
  int joined = 0;
  std::string first_refusal;
  for (auto& r : joins)
    job.join(std::move(r), t0 + 1h, t0, [&](JoinResult res) {
      if (res.outcome.ok())
        ++joined;
      else if (first_refusal.empty())
        first_refusal = res.outcome.message;
    });
  EXPECT_EQ(joined, n) << first_refusal;
  EXPECT_EQ(job.status().state, State::kRunning);
}

TEST(Job, UnknownSessionIsRefused) {
  Job job(job_options(1));
  const TimePoint t0 = Clock::now();
  form(job, 1, t0);
  EXPECT_EQ(job.set("forged", "k", "v").code, Code::kUnauthenticated);
  EXPECT_EQ(job.heartbeat("forged", Progress{}, t0).outcome.code, Code::kUnauthenticated);
  EXPECT_EQ(job.leave("", true, "", t0).outcome.code, Code::kUnauthenticated);
  std::optional<Outcome> o;
  job.barrier("forged", "b", t0 + 1s, t0, [&](Outcome x, int64_t) { o = x; });
  EXPECT_EQ(o->code, Code::kUnauthenticated);
  EXPECT_EQ(job.status().state, State::kRunning) << "a stranger does not disturb the job";
}

TEST(Job, FailureAbortsEveryWaitAndNamesTheRank) {
  Job job(job_options(3));
  const TimePoint t0 = Clock::now();
  auto s = form(job, 3, t0);
  std::optional<Outcome> get, barrier;
  job.get(s[0], "never", t0 + 1h, t0, [&](Outcome o, std::string) { get = o; });
  job.barrier(s[2], "b", t0 + 1h, t0, [&](Outcome o, int64_t) { barrier = o; });
  job.leave(s[1], false, "out of memory", t0 + 10ms);
  ASSERT_TRUE(get && barrier);
  EXPECT_EQ(get->code, Code::kAborted);
  EXPECT_EQ(get->message, "the job failed: rank 1 (host host1) failed: out of memory");
  EXPECT_EQ(barrier->code, Code::kAborted);
  const JobStatus st = job.heartbeat(s[0], Progress{}, t0 + 20ms).status;
  EXPECT_EQ(st.state, State::kFailed);
  EXPECT_EQ(st.failed_rank(), 1);
  // Finished once the others left (they heard of it in a heartbeat) ...
  job.tick(t0 + 30ms);
  EXPECT_FALSE(job.finished());
  job.leave(s[0], false, "aborted: rank 1 failed", t0 + 40ms);
  job.leave(s[2], false, "aborted: rank 1 failed", t0 + 40ms);
  job.tick(t0 + 50ms);
  EXPECT_TRUE(job.finished());
  EXPECT_EQ(job.status().failure(), "rank 1 (host host1) failed: out of memory")
      << "the root cause, not the echoes";
}

TEST(Job, SilentRankFailsTheJobAndTheOthersAreFinishedAfterTheLinger) {
  Job job(job_options(2));
  const TimePoint t0 = Clock::now();
  auto s = form(job, 2, t0);
  for (int i = 1; i <= 12; ++i) {
    const TimePoint now = t0 + i * 100ms;
    job.heartbeat(s[0], Progress{}, now);
    job.tick(now);
  }
  const JobStatus st = job.status();
  ASSERT_EQ(st.state, State::kFailed);
  EXPECT_EQ(st.failed_rank(), 1);
  EXPECT_NE(st.failure().find("rank 1 (host host1, pid 1001) stopped sending heartbeats"),
            std::string::npos)
      << st.failure();
  EXPECT_FALSE(job.finished()) << "rank 0 still gets to hear it";
  job.tick(t0 + 1200ms + 3 * 100ms + 2s);
  EXPECT_TRUE(job.finished());
}

// What a Watch stream sees: the verdict pushed the moment the job fails,
// then "finished"; and a stream that ends before its rank left makes the
// rank disconnected, which a peer's report turns into a death at once.
TEST(Job, WatchersHearTheVerdictAndAClosedStreamCountsAsDisconnected) {
  Job job(job_options(3));
  const TimePoint t0 = Clock::now();
  auto s = form(job, 3, t0);
  std::vector<std::pair<JobStatus, bool>> heard;
  const Job::WatchReply w0 = job.watch(
      s[0], t0, [&](const JobStatus& st, bool finished) { heard.emplace_back(st, finished); });
  ASSERT_TRUE(w0.outcome.ok());
  EXPECT_EQ(w0.rank, 0);
  EXPECT_EQ(w0.status.state, State::kRunning);
  EXPECT_EQ(job.watch("forged", t0, [](const JobStatus&, bool) {}).outcome.code,
            Code::kUnauthenticated);
  const Job::WatchReply w2 = job.watch(s[2], t0, [](const JobStatus&, bool) {});
  const Job::WatchReply w2b = job.watch(s[2], t0, [](const JobStatus&, bool) {});  // reopened
  job.unwatch(w2.id, t0 + 10ms);  // the old stream's end arrives late: rank 2 is still connected
  job.tick(t0 + 500ms);           // (the grace for a dropped connection is 100 ms here)
  EXPECT_EQ(job.status().state, State::kRunning);
  job.unwatch(w2b.id, t0 + 500ms);  // its last stream ended without a Leave
  job.report_peer_fault(s[1], 2, comm::PeerFault::kClosed, "rank 1: connection to rank 2: closed",
                        t0 + 510ms);
  EXPECT_TRUE(heard.empty());
  job.tick(t0 + 520ms);
  ASSERT_EQ(job.status().state, State::kFailed);
  EXPECT_EQ(job.status().verdict.cause, Cause::kProcessDied);
  EXPECT_EQ(job.status().failed_rank(), 2);
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].first.state, State::kFailed);
  EXPECT_FALSE(heard[0].second);
  job.leave(s[0], false, "the job failed", t0 + 530ms);
  job.leave(s[1], false, "the job failed", t0 + 530ms);
  job.tick(t0 + 540ms);
  EXPECT_TRUE(job.finished()) << "the dead rank is not waited for";
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_TRUE(heard[1].second);
}

TEST(Job, ACoordinatorPauseAsLongAsTheTimeoutFailsTheJobBlamingNoRank) {
  Job job(job_options(2));  // heartbeat every 100 ms, timeout 1 s
  const TimePoint t0 = Clock::now();
  form(job, 2, t0);
  job.paused(1500ms, t0 + 1500ms);
  const JobStatus st = job.status();
  ASSERT_EQ(st.state, State::kFailed);
  EXPECT_EQ(st.verdict.cause, Cause::kCoordinatorStalled);
  EXPECT_EQ(st.failed_rank(), -1);
  EXPECT_EQ(st.failure().rfind("the coordinator itself did not run for 1.5 s", 0), 0u)
      << st.failure();
}

TEST(Job, AShortCoordinatorPauseIsNotHeldAgainstTheRanks) {
  Job job(job_options(2));
  const TimePoint t0 = Clock::now();
  auto s = form(job, 2, t0);
  job.heartbeat(s[0], Progress{}, t0);
  job.heartbeat(s[1], Progress{}, t0);
  job.paused(800ms, t0 + 800ms);  // the ranks' heartbeats of that time are still queued
  job.tick(t0 + 1200ms);
  EXPECT_EQ(job.status().state, State::kRunning);
}

TEST(Job, FingerprintDifferenceFailsTheJob) {
  Job job(job_options(2));
  const TimePoint t0 = Clock::now();
  auto s = form(job, 2, t0);
  Fingerprint f0, f1;
  f0.model = "Linear(4 -> 2)";
  f1.model = "Linear(4 -> 3)";
  std::optional<Outcome> o0, o1;
  job.validate(s[1], f1, t0 + 1s, t0, [&](Outcome o) { o1 = o; });
  job.validate(s[0], f0, t0 + 1s, t0, [&](Outcome o) { o0 = o; });
  ASSERT_TRUE(o0 && o1);
  EXPECT_TRUE(o0->ok());
  EXPECT_EQ(o1->code, Code::kFailedPrecondition);
  EXPECT_EQ(job.status().state, State::kFailed);
  EXPECT_EQ(job.status().failed_rank(), 1);
  EXPECT_EQ(job.status().verdict.cause, Cause::kModelMismatch);
  EXPECT_NE(job.status().failure().find("rank 1 (host host1) differs from rank 0: model"),
            std::string::npos)
      << job.status().failure();
}

TEST(Job, RendezvousTimeoutFailsTheJob) {
  Job job(job_options(3));
  const TimePoint t0 = Clock::now();
  std::optional<Outcome> o;
  job.join(worker(job, 0), t0 + 1h, t0, [&](JoinResult r) { o = r.outcome; });
  job.tick(t0 + 5s);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->code, Code::kDeadlineExceeded);
  EXPECT_EQ(job.status().state, State::kFailed);
  EXPECT_NE(job.status().failure().find("1 of 3 workers joined"), std::string::npos);
  job.tick(t0 + 5s);
  EXPECT_TRUE(job.finished()) << "nobody to wait for";
}

// Note [Attempts]: a rank that goes silent ends attempt 0; its ranks hear
// RESTARTING, their sessions no longer reach the new attempt's store, the
// next attempt forms with a new nonce and resumes from the latest
// checkpoint; once the budget is spent, the next failure fails the job.
TEST(Job, ADeadRankEndsTheAttemptAndTheJobReformsWithinItsBudget) {
  JobOptions o = job_options(2);
  o.max_restarts = 1;
  Job job(o);
  const TimePoint t0 = Clock::now();
  JoinResult first;
  auto s = form(job, 2, t0, &first);
  EXPECT_EQ(first.attempt, 0);
  EXPECT_EQ(first.attempt_nonce.size(), kNonceBytes);
  EXPECT_EQ(job.config_for(0), o.config_json);
  job.heartbeat(s[0], {}, t0 + 900ms);
  job.tick(t0 + 1500ms);  // rank 1 silent for longer than the timeout
  EXPECT_NE(job.status().state, State::kFailed) << job.status().failure();
  const Job::Reply hb = job.heartbeat(s[0], {}, t0 + 1600ms);
  EXPECT_EQ(hb.status.state, State::kRestarting);
  EXPECT_EQ(hb.status.verdict.rank, 1);
  EXPECT_EQ(hb.attempt, 0);
  const Outcome late = job.set(s[0], "k", "v");
  EXPECT_EQ(late.code, Code::kFailedPrecondition);
  EXPECT_NE(late.message.find("session of attempt 0; the job is in attempt 1"), std::string::npos)
      << late.message;
  // The attempt just ended may deliver its last records until the next forms.
  MetricsRecord r;
  r.metrics.step = 1;
  EXPECT_TRUE(job.metrics(s[0], 0, {r}).outcome.ok());
  ASSERT_EQ(job.restarts().size(), 1u);
  EXPECT_EQ(job.restarts()[0].attempt, 1);
  EXPECT_EQ(job.restarts()[0].verdict.rank, 1);

  JoinResult second;
  auto s2 = form(job, 2, t0 + 2s, &second);
  EXPECT_EQ(second.attempt, 1);
  EXPECT_NE(second.attempt_nonce, first.attempt_nonce)
      << "a key of attempt 0 is useless in attempt 1";
  EXPECT_EQ(job.status().state, State::kRunning);
  EXPECT_NE(job.config_for(1).find("\"resume_latest\":true"), std::string::npos)
      << job.config_for(1);
  EXPECT_EQ(job.metrics(s[0], 0, {r}).outcome.code, Code::kFailedPrecondition)
      << "an old attempt's records are not mixed into the new one";
  EXPECT_TRUE(job.set(s2[0], "k", "v").ok());

  job.heartbeat(s2[0], {}, t0 + 2900ms);
  job.tick(t0 + 3500ms);  // rank 1 of attempt 1 silent too: no restart left
  EXPECT_EQ(job.status().state, State::kFailed);
  EXPECT_NE(job.status().failure().find("no restart left: all 1 of --max-restarts used"),
            std::string::npos)
      << job.status().failure();
}

// --on-failure shrink (Note [Shrinking]): a silent rank ends the attempt,
// the survivors re-join asking for their old ranks and form the next attempt
// at once, as ranks 0..n-2 in that order; no restart is spent. Below
// --min-nproc survivors the job fails, saying so.
TEST(Job, ShrinkReformsTheSurvivorsAtOnceInTheOrderOfTheirRanks) {
  JobOptions o = job_options(3);
  o.shrink = true;
  o.min_nproc = 2;
  Job job(o);
  const TimePoint t0 = Clock::now();
  auto s = form(job, 3, t0);
  job.heartbeat(s[0], {}, t0 + 900ms);
  job.heartbeat(s[2], {}, t0 + 900ms);
  job.tick(t0 + 1500ms);  // rank 1 silent for longer than the timeout
  const Job::Reply hb = job.heartbeat(s[2], {}, t0 + 1600ms);
  ASSERT_EQ(hb.status.state, State::kRestarting) << hb.status.failure();
  EXPECT_EQ(hb.status.failed_rank(), 1);
  ASSERT_EQ(job.restarts().size(), 1u);
  EXPECT_TRUE(job.restarts()[0].shrink);

  // A newcomer (not a survivor) cannot join the shrink's attempt.
  Outcome newcomer;
  job.join(worker(job, 7), t0 + 1h, t0 + 1650ms, [&](JoinResult res) { newcomer = res.outcome; });
  EXPECT_EQ(newcomer.code, Code::kFailedPrecondition);
  EXPECT_NE(newcomer.message.find("re-forms from the survivors of attempt 0 alone"),
            std::string::npos)
      << newcomer.message;
  // Old rank 2 joins first: it still gets rank 1, after old rank 0.
  std::map<int, int> rank_of_host;  // host index -> new rank
  int world = 0;
  for (int old : {2, 0}) {
    JoinRequest r = worker(job, old);
    r.requested_rank = old;
    job.join(r, t0 + 1h, t0 + 1700ms, [&, old](JoinResult res) {
      ASSERT_TRUE(res.outcome.ok()) << res.outcome.message;
      rank_of_host[old] = res.self.rank;
      world = res.world_size;
    });
  }
  EXPECT_EQ(world, 2) << "the attempt formed without waiting for the dead rank";
  EXPECT_EQ(rank_of_host, (std::map<int, int>{{0, 0}, {2, 1}}));
  EXPECT_EQ(job.status().state, State::kRunning);
  EXPECT_EQ(job.world_size(), 2);

  // One more silent rank would leave 1, fewer than --min-nproc 2.
  const auto members = job.members();
  job.heartbeat(members[0].session, {}, t0 + 2500ms);
  job.tick(t0 + 3000ms);
  EXPECT_EQ(job.status().state, State::kFailed);
  EXPECT_NE(
      job.status().failure().find("(--on-failure shrink: 1 rank left, fewer than --min-nproc 2)"),
      std::string::npos)
      << job.status().failure();
}

// A rank's own error (a NaN loss, a bad file, Ctrl-C) is not cured by
// going on without it: under shrink the job fails, as it would without.
TEST(Job, ShrinkLeavesARanksOwnErrorFatal) {
  JobOptions o = job_options(3);
  o.shrink = true;
  Job job(o);
  const TimePoint t0 = Clock::now();
  auto s = form(job, 3, t0);
  job.leave(s[1], false, "rank 1 was interrupted (SIGTERM)", t0 + 100ms);
  EXPECT_EQ(job.status().state, State::kFailed);
  EXPECT_TRUE(job.restarts().empty());
  EXPECT_NE(job.status().failure().find("interrupted"), std::string::npos)
      << job.status().failure();
}

// A survivor that dies (or hangs) before it re-joins does not hold the
// others' re-form back for the rendezvous timeout: after a heartbeat
// timeout the attempt forms with those there, its ranks in the order of
// their old ones.
TEST(Job, AReformFormsWithoutASurvivorThatNeverCame) {
  JobOptions o = job_options(4);
  o.shrink = true;
  Job job(o);
  const TimePoint t0 = Clock::now();
  auto s = form(job, 4, t0);
  for (int r : {0, 2, 3}) job.heartbeat(s[r], {}, t0 + 900ms);
  job.tick(t0 + 1500ms);  // rank 1 silent: the 3 others re-form
  ASSERT_EQ(job.restarts().size(), 1u);
  std::map<int, int> rank_of_host;
  for (int host : {3, 0}) {  // old rank 2 never comes back
    JoinRequest r = worker(job, host);
    r.requested_rank = host;
    job.join(r, t0 + 1h, t0 + 1600ms, [&, host](JoinResult res) {
      ASSERT_TRUE(res.outcome.ok()) << res.outcome.message;
      rank_of_host[host] = res.self.rank;
    });
  }
  job.tick(t0 + 2000ms);
  EXPECT_TRUE(rank_of_host.empty()) << "formed before the missing survivor's time was up";
  job.tick(t0 + 2700ms);  // a heartbeat timeout after the re-form opened
  EXPECT_EQ(rank_of_host, (std::map<int, int>{{0, 0}, {3, 1}}));
  EXPECT_EQ(job.world_size(), 2);
  EXPECT_EQ(job.status().state, State::kRunning);
}

// --on-failure heal (Note [Healing]): a worker that joins while the job
// runs on fewer ranks than --world-size is parked; at the next tick the
// attempt ends with cause "grow", and the survivors (their old ranks first)
// and the newcomer (the ranks after, whatever RANK it asked for) form the
// next one. Its ranks are told to take the state from live peers, not from
// a checkpoint. No restart is spent; a worker more than the world waits.
TEST(Job, HealGrowsTheJobBackWithTheNewcomerAfterTheSurvivors) {
  JobOptions o = job_options(3);
  o.shrink = o.heal = true;
  Job job(o);
  const TimePoint t0 = Clock::now();
  auto s = form(job, 3, t0);
  job.heartbeat(s[0], {}, t0 + 900ms);
  job.heartbeat(s[2], {}, t0 + 900ms);
  job.tick(t0 + 1500ms);  // rank 1 silent: the job shrinks to 2
  ASSERT_EQ(job.heartbeat(s[2], {}, t0 + 1600ms).status.state, State::kRestarting);

  // The dead rank started again (asking for its old rank, as `run` does)
  // while the survivors re-form: it is told to prepare (its model built
  // first, no session), then, ready, waits for the attempt after.
  std::optional<JoinResult> newcomer;
  JoinRequest again = worker(job, 7);
  again.requested_rank = 1;
  job.join(again, t0 + 1h, t0 + 1650ms, [&](JoinResult r) { newcomer = r; });
  ASSERT_TRUE(newcomer && newcomer->outcome.ok() && newcomer->prepare);
  EXPECT_TRUE(newcomer->self.session.empty());
  EXPECT_EQ(newcomer->world_size, 3);
  EXPECT_NE(job.newcomer_config().find("\"from_peers\":true"), std::string::npos);
  newcomer.reset();
  again = worker(job, 7);
  again.requested_rank = 1;
  again.ready = true;
  job.join(again, t0 + 1h, t0 + 1660ms, [&](JoinResult r) { newcomer = r; });
  // The survivors re-join, asking for their old ranks, and form attempt 1.
  const auto rejoin = [&](const std::vector<std::pair<int, int>>& host_and_rank, TimePoint at) {
    std::map<int, int> rank_of_host;
    for (auto [host, old] : host_and_rank) {
      JoinRequest r = worker(job, host);
      r.requested_rank = old;
      job.join(r, at + 1h, at, [&, host](JoinResult res) {
        ASSERT_TRUE(res.outcome.ok()) << res.outcome.message;
        rank_of_host[host] = res.self.rank;
      });
    }
    return rank_of_host;
  };
  EXPECT_EQ(rejoin({{2, 2}, {0, 0}}, t0 + 1700ms), (std::map<int, int>{{0, 0}, {2, 1}}));
  EXPECT_EQ(job.world_size(), 2);
  EXPECT_FALSE(newcomer) << "the newcomer was answered before the job shrank";

  job.tick(t0 + 1800ms);  // the running attempt takes the newcomer in
  ASSERT_EQ(job.restarts().size(), 2u);
  EXPECT_TRUE(job.restarts()[1].grow);
  EXPECT_EQ(job.restarts()[1].verdict.cause, Cause::kGrow);
  EXPECT_NE(job.restarts()[1].verdict.message.find("host host7 pid 1007 joined"), std::string::npos)
      << job.restarts()[1].verdict.message;
  // The survivors of attempt 1 (hosts 0 and 2, its ranks 0 and 1) re-join.
  EXPECT_EQ(rejoin({{2, 1}, {0, 0}}, t0 + 1900ms), (std::map<int, int>{{0, 0}, {2, 1}}));
  ASSERT_TRUE(newcomer && newcomer->outcome.ok()) << (newcomer ? newcomer->outcome.message : "");
  EXPECT_EQ(newcomer->attempt, 2);
  EXPECT_EQ(newcomer->world_size, 3);
  EXPECT_EQ(newcomer->self.rank, 2) << "the newcomer takes the rank after the survivors";
  EXPECT_EQ(job.status().state, State::kRunning);
  EXPECT_EQ(job.restarts()[0].shrink + job.restarts()[1].grow, 2);
  for (int attempt : {1, 2}) {
    EXPECT_NE(job.config_for(attempt).find("\"from_peers\":true"), std::string::npos);
    EXPECT_EQ(job.config_for(attempt).find("resume_latest"), std::string::npos);
  }

  // Full again: one worker more waits, and the job does not re-form for it.
  bool answered = false;
  JoinRequest extra = worker(job, 8);
  extra.ready = true;
  job.join(extra, t0 + 1h, t0 + 2000ms, [&](JoinResult) { answered = true; });
  job.tick(t0 + 2100ms);
  EXPECT_FALSE(answered);
  EXPECT_EQ(job.restarts().size(), 2u);
}

// Ranks as threads hammering the store, barriers, heartbeats and metrics while
// a ticker drives deadlines: every wait completes, nothing is lost (also the
// test to run under -DMICRODDP_SANITIZE=thread).
TEST(Job, ConcurrentRanksAndTicker) {
  constexpr int kRanks = 4, kRounds = 200;
  JobOptions o = job_options(kRanks);
  o.heartbeat_timeout = 60s;
  Job job(o);
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop) {
      job.tick(Clock::now());
      std::this_thread::sleep_for(1ms);
    }
  });
  std::vector<std::string> sessions(kRanks);
  {
    // join() answers the last joiner's call with everyone's results, so none blocks.
    std::vector<std::thread> joiners;
    for (int i = 0; i < kRanks; ++i)
      joiners.emplace_back([&, i] {
        job.join(worker(job, i), Clock::now() + 30s, Clock::now(), [&](JoinResult r) {
          if (r.outcome.ok()) sessions[static_cast<std::size_t>(r.self.rank)] = r.self.session;
        });
      });
    for (auto& t : joiners) t.join();
    for (const auto& s : sessions) ASSERT_FALSE(s.empty());
  }
  mddp::test::run_threads(
      kRanks,
      [&](int rank) {
        const std::string& s = sessions[static_cast<std::size_t>(rank)];
        for (int i = 0; i < kRounds; ++i) {
          ASSERT_TRUE(
              job.set(s, "k/" + std::to_string(rank) + "/" + std::to_string(i), std::to_string(i))
                  .ok());
          std::promise<std::string> got;
          job.get(s, "k/" + std::to_string((rank + 1) % kRanks) + "/" + std::to_string(i),
                  Clock::now() + 20s, Clock::now(), [&](Outcome o, std::string v) {
                    got.set_value(o.ok() ? v : "error: " + o.message);
                  });
          ASSERT_EQ(got.get_future().get(), std::to_string(i));
          std::promise<Outcome> passed;
          job.barrier(s, "round", Clock::now() + 20s, Clock::now(),
                      [&](Outcome o, int64_t) { passed.set_value(o); });
          const Outcome b = passed.get_future().get();
          ASSERT_TRUE(b.ok()) << b.message;
          Progress p;
          p.step = i;
          ASSERT_TRUE(job.heartbeat(s, p, Clock::now()).outcome.ok());
          MetricsRecord rec;
          rec.metrics.step = i;
          ASSERT_TRUE(job.metrics(s, 0, {rec}).outcome.ok());
        }
        ASSERT_TRUE(job.leave(s, true, "", Clock::now()).outcome.ok());
      },
      std::chrono::seconds(60));
  stop = true;
  ticker.join();
  EXPECT_EQ(job.status().state, State::kSucceeded);
  EXPECT_EQ(job.metrics_log().count(), uint64_t{kRanks} * kRounds);
  EXPECT_EQ(job.store_size(), std::size_t{kRanks} * kRounds);
}

TEST(Job, RejectsContradictoryHeartbeatSettings) {
  JobOptions o = job_options(2);
  o.heartbeat_timeout = 150ms;
  EXPECT_THROW(Job{o}, InputError);
}

// What a rank reports it runs on (in its heartbeats, once it resolved the
// job's config) replaces what it asked for at join, in members() and in
// job.json, which the next tick rewrites.
TEST(Job, ReportedResourcesReachTheMembersAndJobJson) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mddp-job-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  JobOptions o = job_options(2);
  o.config_json = R"({"batch": 8, "device": "cuda", "threads": 2})";
  o.run_dir = dir;
  Job job(o);
  const TimePoint t0 = Clock::now();
  auto s = form(job, 2, t0);
  const auto read_members = [&] {
    std::ifstream in(dir / "job.json");
    return nlohmann::json::parse(in).at("members");
  };
  // Formed: no report yet, so the job's device and unknown counts.
  nlohmann::json m = read_members();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1]["device"], "cuda");
  EXPECT_TRUE(m[1]["threads"].is_null());
  EXPECT_TRUE(m[1]["cpus"].is_null());

  EXPECT_TRUE(job.heartbeat(s[1], Progress{}, t0 + 10ms, Resources{"cuda:1", 2, 16}).outcome.ok());
  const std::vector<Member> members = job.members();
  EXPECT_EQ(members[1].device, "cuda:1");
  EXPECT_EQ(members[1].threads, 2);
  EXPECT_EQ(members[1].cpus, 16);
  EXPECT_EQ(members[0].threads, 0);  // rank 0 has not reported
  job.tick(t0 + 20ms);
  m = read_members();
  EXPECT_EQ(m[1]["device"], "cuda:1");
  EXPECT_EQ(m[1]["threads"], 2);
  EXPECT_EQ(m[1]["cpus"], 16);
  EXPECT_EQ(m[1]["host"], "host1");
  EXPECT_EQ(m[1]["pid"], 1001);
  EXPECT_EQ(m[0]["device"], "cuda");
  EXPECT_TRUE(m[0]["cpus"].is_null());
  for (const auto& e : std::filesystem::directory_iterator(dir))  // no temporary left
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();

  // An empty or overlong device and non-positive counts change nothing;
  // nor does a forged session.
  EXPECT_TRUE(job.heartbeat(s[1], Progress{}, t0 + 30ms, Resources{std::string(100, 'x'), 0, -1})
                  .outcome.ok());
  EXPECT_EQ(job.heartbeat("forged", Progress{}, t0 + 30ms, Resources{"cpu", 1, 1}).outcome.code,
            Code::kUnauthenticated);
  EXPECT_EQ(job.members()[1].device, "cuda:1");
  EXPECT_EQ(job.members()[1].cpus, 16);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mddp::coordinator

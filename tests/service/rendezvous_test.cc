// Rendezvous without gRPC: rank assignment and every refusal, with time
// driven by hand.
#include "coordinator/rendezvous.h"

#include <gtest/gtest.h>

#include <optional>

#include "service/test_clock.h"

namespace mddp::coordinator {
namespace {

using namespace std::chrono_literals;

const TimePoint kFar = t0 + 1h;

JoinRequest worker(const std::string& host, int requested = -1) {
  JoinRequest r;
  r.job_id = "job";
  r.host = host;
  r.pid = 100;
  r.requested_rank = requested;
  return r;
}

Rendezvous::Options rendezvous_options(int n) {
  Rendezvous::Options o;
  o.job_id = "job";
  o.world_size = n;
  o.timeout = 10s;
  return o;
}

// Collects the result of one join.
struct Result {
  std::optional<JoinResult> r;
  Rendezvous::JoinCallback cb() {
    return [this](JoinResult x) {
      ASSERT_FALSE(r.has_value()) << "callback ran twice";
      r = std::move(x);
    };
  }
};

TEST(Rendezvous, AssignsRanksInJoinOrderWhenAllJoined) {
  int hook_calls = 0;
  Rendezvous rv(rendezvous_options(3), t0, [&](const std::vector<Member>& m, TimePoint) {
    ++hook_calls;
    EXPECT_EQ(m.size(), 3u);
  });
  Result a, b, c;
  rv.join(worker("a"), kFar, t0, a.cb());
  rv.join(worker("b"), kFar, t0, b.cb());
  EXPECT_FALSE(a.r || b.r) << "nobody gets a rank before all joined";
  EXPECT_FALSE(rv.complete());
  rv.join(worker("c"), kFar, t0, c.cb());
  ASSERT_TRUE(a.r && b.r && c.r);
  EXPECT_EQ(hook_calls, 1);
  EXPECT_TRUE(a.r->outcome.ok());
  EXPECT_EQ(a.r->self.rank, 0);
  EXPECT_EQ(b.r->self.rank, 1);
  EXPECT_EQ(c.r->self.rank, 2);
  EXPECT_EQ(c.r->world_size, 3);
  EXPECT_EQ(rv.members().at(1).host, "b");
  EXPECT_NE(a.r->self.session, b.r->self.session);
  EXPECT_EQ(a.r->self.session.size(), 32u);
  auto m = rv.member(b.r->self.session);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->rank, 1);
  EXPECT_FALSE(rv.member("nonsense"));
  EXPECT_FALSE(rv.member(""));
}

TEST(Rendezvous, HonoursRequestedRanksAndFillsTheRest) {
  Rendezvous rv(rendezvous_options(4), t0);
  Result a, b, c, d;
  rv.join(worker("a"), kFar, t0, a.cb());     // any -> 1 (0 is requested by c)
  rv.join(worker("b", 3), kFar, t0, b.cb());  // asks for 3
  rv.join(worker("c", 0), kFar, t0, c.cb());  // asks for 0
  rv.join(worker("d"), kFar, t0, d.cb());     // any -> 2
  ASSERT_TRUE(a.r && b.r && c.r && d.r);
  EXPECT_EQ(a.r->self.rank, 1);
  EXPECT_EQ(b.r->self.rank, 3);
  EXPECT_EQ(c.r->self.rank, 0);
  EXPECT_EQ(d.r->self.rank, 2);
  EXPECT_EQ(rv.members().at(0).host, "c");
}

TEST(Rendezvous, RefusesDuplicateAndOutOfRangeRanks) {
  Rendezvous rv(rendezvous_options(3), t0);
  Result a, dup, out, neg;
  rv.join(worker("a", 1), kFar, t0, a.cb());
  rv.join(worker("b", 1), kFar, t0, dup.cb());
  ASSERT_TRUE(dup.r);
  EXPECT_EQ(dup.r->outcome.code, Code::kAlreadyExists);
  EXPECT_NE(dup.r->outcome.message.find("rank 1 is already taken by host a"), std::string::npos)
      << dup.r->outcome.message;
  rv.join(worker("c", 3), kFar, t0, out.cb());
  EXPECT_EQ(out.r->outcome.code, Code::kInvalidArgument);
  EXPECT_NE(out.r->outcome.message.find("outside 0..2"), std::string::npos);
  EXPECT_FALSE(a.r) << "the first worker still waits";
}

TEST(Rendezvous, RefusesAWorkerBeyondN) {
  Rendezvous rv(rendezvous_options(2), t0);
  Result a, b, extra;
  rv.join(worker("a"), kFar, t0, a.cb());
  rv.join(worker("b"), kFar, t0, b.cb());
  rv.join(worker("c"), kFar, t0, extra.cb());
  ASSERT_TRUE(extra.r);
  EXPECT_EQ(extra.r->outcome.code, Code::kResourceExhausted);
  EXPECT_NE(extra.r->outcome.message.find("is full: all 2 ranks joined"), std::string::npos);
  EXPECT_NE(extra.r->outcome.message.find("host c"), std::string::npos);
}

TEST(Rendezvous, WindowTimeoutSaysHowManyJoined) {
  Rendezvous rv(rendezvous_options(4), t0);
  Result a, b;
  rv.join(worker("a"), kFar, t0, a.cb());
  rv.join(worker("b"), kFar, t0 + 2s, b.cb());
  EXPECT_FALSE(rv.expire(t0 + 9s));
  EXPECT_FALSE(a.r);
  auto closed = rv.expire(t0 + 10s);
  ASSERT_TRUE(closed);
  ASSERT_TRUE(a.r && b.r);
  EXPECT_EQ(a.r->outcome.code, Code::kDeadlineExceeded);
  EXPECT_NE(a.r->outcome.message.find("2 of 4 workers joined"), std::string::npos)
      << a.r->outcome.message;
  EXPECT_NE(a.r->outcome.message.find("host a pid 100, host b pid 100"), std::string::npos);
  EXPECT_TRUE(rv.timed_out());
  Result late;
  rv.join(worker("c"), kFar, t0 + 11s, late.cb());
  EXPECT_EQ(late.r->outcome.code, Code::kFailedPrecondition);
}

TEST(Rendezvous, WindowClosesEvenWhenNobodyJoined) {
  Rendezvous rv(rendezvous_options(2), t0);
  EXPECT_FALSE(rv.expire(t0 + 9s));
  auto closed = rv.expire(t0 + 10s);
  ASSERT_TRUE(closed);
  EXPECT_NE(closed->find("0 of 2 workers joined; start the missing 2"), std::string::npos)
      << *closed;
  EXPECT_FALSE(rv.expire(t0 + 11s)) << "reported once";
}

TEST(Rendezvous, AJoinPastItsOwnDeadlineOrCancelledFreesItsPlace) {
  Rendezvous rv(rendezvous_options(2), t0);
  Result a, b, c;
  rv.join(worker("a", 0), t0 + 1s, t0, a.cb());
  rv.expire(t0 + 1s);
  ASSERT_TRUE(a.r);
  EXPECT_EQ(a.r->outcome.code, Code::kDeadlineExceeded);
  const Ticket t = rv.join(worker("b", 0), kFar, t0 + 2s, b.cb());  // rank 0 is free again
  EXPECT_FALSE(b.r);
  rv.cancel(t.id);
  ASSERT_TRUE(b.r);
  EXPECT_EQ(b.r->outcome.code, Code::kCancelled);
  rv.cancel(t.id);  // twice: no second callback
  Result d, e;
  rv.join(worker("d", 0), kFar, t0 + 3s, d.cb());
  rv.join(worker("e"), kFar, t0 + 3s, e.cb());
  ASSERT_TRUE(d.r && e.r);
  EXPECT_EQ(d.r->self.rank, 0);
  EXPECT_EQ(e.r->self.rank, 1);
}

TEST(Rendezvous, AbortAnswersEveryPendingJoin) {
  Rendezvous rv(rendezvous_options(3), t0);
  Result a, later;
  rv.join(worker("a"), kFar, t0, a.cb());
  rv.abort("the job failed: x");
  ASSERT_TRUE(a.r);
  EXPECT_EQ(a.r->outcome.code, Code::kAborted);
  rv.join(worker("b"), kFar, t0, later.cb());
  EXPECT_EQ(later.r->outcome.code, Code::kAborted);
}

}  // namespace
}  // namespace mddp::coordinator

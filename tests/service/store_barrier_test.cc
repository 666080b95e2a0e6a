// KvStore, Barrier and FingerprintCheck without gRPC, time driven by hand.
#include <gtest/gtest.h>

#include <optional>

#include "coordinator/barrier.h"
#include "coordinator/fingerprint_check.h"
#include "coordinator/kv_store.h"
#include "core/common/check.h"
#include "service/test_clock.h"

namespace mddp::coordinator {
namespace {

using namespace std::chrono_literals;

struct GetResult {
  std::optional<Outcome> outcome;
  std::string value;
  KvStore::GetCallback cb() {
    return [this](Outcome o, std::string v) {
      ASSERT_FALSE(outcome) << "callback ran twice";
      outcome = std::move(o);
      value = std::move(v);
    };
  }
};

TEST(KvStore, GetAnswersAtOnceWhenTheKeyExists) {
  KvStore kv;
  EXPECT_TRUE(kv.set("comm/addr/0", "10.0.0.1:5000").ok());
  GetResult g;
  kv.get("comm/addr/0", t0 + 1s, t0, g.cb());
  ASSERT_TRUE(g.outcome);
  EXPECT_TRUE(g.outcome->ok());
  EXPECT_EQ(g.value, "10.0.0.1:5000");
}

TEST(KvStore, GetWaitsForSetAndSetOverwrites) {
  KvStore kv;
  GetResult g1, g2, other;
  kv.get("nccl/id", t0 + 5s, t0, g1.cb());
  kv.get("nccl/id", t0 + 5s, t0, g2.cb());
  kv.get("other", t0 + 5s, t0, other.cb());
  EXPECT_FALSE(g1.outcome);
  ASSERT_TRUE(kv.set("nccl/id", std::string("\0\x01\x02", 3)).ok());
  ASSERT_TRUE(g1.outcome && g2.outcome);
  EXPECT_EQ(g1.value, std::string("\0\x01\x02", 3)) << "values are bytes";
  EXPECT_EQ(g2.value, g1.value);
  EXPECT_FALSE(other.outcome);
  kv.set("nccl/id", "v2");
  EXPECT_EQ(*kv.peek("nccl/id"), "v2");
  EXPECT_EQ(kv.size(), 1u);
}

TEST(KvStore, GetTimesOutNamingTheKey) {
  KvStore kv;
  GetResult g;
  kv.get("comm/addr/3", t0 + 2s, t0, g.cb());
  kv.expire(t0 + 1s);
  EXPECT_FALSE(g.outcome);
  kv.expire(t0 + 2s);
  ASSERT_TRUE(g.outcome);
  EXPECT_EQ(g.outcome->code, Code::kDeadlineExceeded);
  EXPECT_NE(g.outcome->message.find("key 'comm/addr/3' was not set within 2.0 s"),
            std::string::npos)
      << g.outcome->message;
}

TEST(KvStore, CancelAndAbortAnswerWaiters) {
  KvStore kv;
  GetResult a, b, late;
  const Ticket t = kv.get("k", t0 + 5s, t0, a.cb());
  kv.cancel(t.id);
  ASSERT_TRUE(a.outcome);
  EXPECT_EQ(a.outcome->code, Code::kCancelled);
  kv.get("k", t0 + 5s, t0, b.cb());
  kv.abort("the job failed: rank 1 died");
  ASSERT_TRUE(b.outcome);
  EXPECT_EQ(b.outcome->code, Code::kAborted);
  EXPECT_EQ(b.outcome->message, "the job failed: rank 1 died");
  EXPECT_EQ(kv.set("k", "v").code, Code::kAborted);
  kv.get("k", t0 + 5s, t0, late.cb());
  EXPECT_EQ(late.outcome->code, Code::kAborted);
}

TEST(KvStore, RejectsBadKeysAndOversizedValues) {
  KvStore kv(KvStore::Limits{.max_key_bytes = 8, .max_value_bytes = 4, .max_total_bytes = 12});
  EXPECT_EQ(kv.set("", "v").code, Code::kInvalidArgument);
  EXPECT_EQ(kv.set("123456789", "v").code, Code::kInvalidArgument);
  EXPECT_EQ(kv.set("k", "12345").code, Code::kInvalidArgument);
  EXPECT_TRUE(kv.set("a", "1234").ok());  // 5 bytes
  EXPECT_TRUE(kv.set("b", "1234").ok());  // 10
  EXPECT_EQ(kv.set("c", "1234").code, Code::kResourceExhausted);
  EXPECT_TRUE(kv.set("a", "1").ok()) << "overwriting frees the old value";
  GetResult g;
  kv.get("", t0 + 1s, t0, g.cb());
  EXPECT_EQ(g.outcome->code, Code::kInvalidArgument);
}

struct BarrierResult {
  std::optional<Outcome> outcome;
  int64_t generation = -1;
  Barrier::Callback cb() {
    return [this](Outcome o, int64_t g) {
      ASSERT_FALSE(outcome) << "callback ran twice";
      outcome = std::move(o);
      generation = g;
    };
  }
};

TEST(Barrier, CompletesWhenAllArriveAndCountsGenerations) {
  Barrier b(3);
  for (int64_t gen = 0; gen < 3; ++gen) {
    BarrierResult r0, r1, r2;
    b.arrive("step", 2, t0 + 5s, t0, r2.cb());
    b.arrive("step", 0, t0 + 5s, t0, r0.cb());
    EXPECT_FALSE(r0.outcome || r2.outcome);
    b.arrive("step", 1, t0 + 5s, t0, r1.cb());
    ASSERT_TRUE(r0.outcome && r1.outcome && r2.outcome);
    EXPECT_TRUE(r0.outcome->ok() && r1.outcome->ok() && r2.outcome->ok());
    EXPECT_EQ(r1.generation, gen);
  }
  EXPECT_EQ(b.generation("step"), 3);
  EXPECT_EQ(b.generation("other"), 0);
}

TEST(Barrier, NamesAreIndependent) {
  Barrier b(2);
  BarrierResult x0, y1;
  b.arrive("x", 0, t0 + 5s, t0, x0.cb());
  b.arrive("y", 1, t0 + 5s, t0, y1.cb());
  EXPECT_FALSE(x0.outcome || y1.outcome);
}

TEST(Barrier, TimeoutNamesTheRanksThatDidNotArrive) {
  Barrier b(4);
  BarrierResult r0, r2;
  b.arrive("start", 0, t0 + 30s, t0, r0.cb());
  b.arrive("start", 2, t0 + 40s, t0 + 1s, r2.cb());
  b.expire(t0 + 29s);
  EXPECT_FALSE(r0.outcome);
  b.expire(t0 + 30s);
  ASSERT_TRUE(r0.outcome && r2.outcome) << "the whole generation fails at the first deadline";
  EXPECT_EQ(r0.outcome->code, Code::kDeadlineExceeded);
  EXPECT_EQ(r0.outcome->message,
            "barrier 'start' (generation 0) timed out after 30.0 s: ranks 1, 3 did not arrive (0, "
            "2 did)");
  EXPECT_EQ(r2.outcome->message, r0.outcome->message);
  // The generation starts over empty.
  BarrierResult again;
  b.arrive("start", 0, t0 + 100s, t0 + 31s, again.cb());
  EXPECT_FALSE(again.outcome);
}

TEST(Barrier, RefusesARankTwiceAndOutOfRange) {
  Barrier b(2);
  BarrierResult first, twice, bad;
  b.arrive("x", 1, t0 + 5s, t0, first.cb());
  b.arrive("x", 1, t0 + 5s, t0, twice.cb());
  ASSERT_TRUE(twice.outcome);
  EXPECT_EQ(twice.outcome->code, Code::kFailedPrecondition);
  EXPECT_NE(twice.outcome->message.find("rank 1 entered barrier 'x' twice"), std::string::npos);
  EXPECT_FALSE(first.outcome);
  b.arrive("x", 2, t0 + 5s, t0, bad.cb());
  EXPECT_EQ(bad.outcome->code, Code::kInvalidArgument);
}

TEST(Barrier, CancelRemovesTheArrivalAndAbortAnswersAll) {
  Barrier b(2);
  BarrierResult a, c, d;
  const Ticket t = b.arrive("x", 0, t0 + 5s, t0, a.cb());
  b.cancel(t.id);
  ASSERT_TRUE(a.outcome);
  EXPECT_EQ(a.outcome->code, Code::kCancelled);
  b.arrive("x", 1, t0 + 5s, t0, c.cb());
  EXPECT_FALSE(c.outcome) << "rank 0's cancelled arrival does not count";
  b.abort("the job failed");
  EXPECT_EQ(c.outcome->code, Code::kAborted);
  b.arrive("x", 0, t0 + 5s, t0, d.cb());
  EXPECT_EQ(d.outcome->code, Code::kAborted);
}

Fingerprint mlp() {
  Fingerprint f;
  f.model = "Sequential(Linear(784 -> 256), ReLU, Linear(256 -> 10))";
  f.parameters = {
      {"0.weight", {256, 784}}, {"0.bias", {256}}, {"2.weight", {10, 256}}, {"2.bias", {10}}};
  f.buckets = {{3, 2}, {1, 0}};
  f.dtype = "fp32";
  f.version = "0.1.0";
  return f;
}

TEST(Fingerprint, DiffIsEmptyForEqualAndShowsEachDifference) {
  EXPECT_EQ(fingerprint_diff(mlp(), mlp()), "");
  Fingerprint f = mlp();
  f.model = "Sequential(Linear(784 -> 128), ReLU, Linear(128 -> 10))";
  f.parameters[0].shape = {128, 784};
  f.parameters[1].shape = {128};
  f.parameters[2].shape = {10, 128};
  const std::string d = fingerprint_diff(f, mlp());
  EXPECT_NE(d.find("parameter 0 '0.weight': shape [128, 784] here vs [256, 784] on rank 0"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("parameter 1 '0.bias': shape [128] here vs [256] on rank 0"), std::string::npos)
      << d;
  EXPECT_NE(d.find("model 'Sequential(Linear(784 -> 128), ReLU, Linear(128 ...' here"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("vs 'Sequential(Linear(784 -> 256)"), std::string::npos) << d;

  Fingerprint g = mlp();
  g.buckets = {{3, 2, 1, 0}};
  g.dtype = "fp16";
  g.version = "0.2.0";
  const std::string e = fingerprint_diff(g, mlp());
  EXPECT_NE(e.find("microddp version 0.2.0 here vs 0.1.0 on rank 0"), std::string::npos) << e;
  EXPECT_NE(e.find("gradient wire type fp16 here vs fp32"), std::string::npos) << e;
  EXPECT_NE(e.find("1 buckets here vs 2 on rank 0"), std::string::npos) << e;

  Fingerprint h = mlp();
  h.parameters.pop_back();
  h.parameters[0].name = "0.w";
  EXPECT_NE(fingerprint_diff(h, mlp()).find("3 parameters here vs 4"), std::string::npos);
  EXPECT_NE(fingerprint_diff(h, mlp()).find("parameter 0 is '0.w' here vs '0.weight'"),
            std::string::npos);
  Fingerprint long_model = mlp();
  long_model.model = std::string(100, 'x') + "A" + std::string(100, 'y');
  Fingerprint long_rank0 = mlp();
  long_rank0.model = std::string(100, 'x') + "B" + std::string(100, 'y');
  EXPECT_EQ(fingerprint_diff(long_model, long_rank0),
            "model '..." + std::string(24, 'x') + "A" + std::string(23, 'y') + "...' here vs '..." +
                std::string(24, 'x') + "B" + std::string(23, 'y') +
                "...' on rank 0 (first difference at character 100)");
  EXPECT_NE(fingerprint_diff(f, mlp(), "rank 0", 1).find("(and 3 more)"), std::string::npos)
      << fingerprint_diff(f, mlp(), "rank 0", 1);
}

struct CheckResult {
  std::optional<Outcome> outcome;
  FingerprintCheck::Callback cb() {
    return [this](Outcome o) {
      ASSERT_FALSE(outcome) << "callback ran twice";
      outcome = std::move(o);
    };
  }
};

TEST(FingerprintCheck, EveryRankWaitsForAllThenTheOddOneIsNamed) {
  FingerprintCheck check(3);
  CheckResult r1, r2, r0;
  Fingerprint bad = mlp();
  bad.parameters[3].shape = {11};
  check.submit(1, "rank 1 (host b)", mlp(), t0 + 5s, t0, r1.cb());
  check.submit(0, "rank 0 (host a)", mlp(), t0 + 5s, t0, r0.cb());
  EXPECT_FALSE(r0.outcome || r1.outcome) << "answered before every rank's fingerprint was in";
  check.submit(2, "rank 2 (host c)", bad, t0 + 5s, t0, r2.cb());
  ASSERT_TRUE(r0.outcome && r1.outcome && r2.outcome);
  EXPECT_TRUE(r0.outcome->ok());
  EXPECT_TRUE(r1.outcome->ok());
  EXPECT_EQ(r2.outcome->code, Code::kFailedPrecondition);
  EXPECT_NE(r2.outcome->message.find(
                "rank 2 (host c) differs from ranks 0, 1: parameter 3 '2.bias': shape [11] here "
                "vs [10] on rank 0"),
            std::string::npos)
      << r2.outcome->message;
  CheckResult late;
  check.submit(1, "rank 1 (host b)", mlp(), t0 + 5s, t0, late.cb());
  EXPECT_TRUE(late.outcome && late.outcome->ok()) << "answered at once once judged";
}

// Compared with rank 0 alone, every other rank would differ and rank 1 would
// be named; counted, rank 0 is the odd one.
TEST(FingerprintCheck, AnOddRankZeroIsNamedNotTheRankComparedWithIt) {
  FingerprintCheck check(4);
  CheckResult r[4];
  Fingerprint odd = mlp();
  odd.buckets = {{0, 1, 2, 3}};
  check.submit(0, "rank 0 (host a)", odd, t0 + 5s, t0, r[0].cb());
  for (int k = 1; k < 4; ++k) check.submit(k, str("rank ", k), mlp(), t0 + 5s, t0, r[k].cb());
  ASSERT_TRUE(r[0].outcome && r[1].outcome && r[2].outcome && r[3].outcome);
  for (int k = 1; k < 4; ++k) EXPECT_TRUE(r[k].outcome->ok()) << k << ": " << r[k].outcome->message;
  EXPECT_EQ(r[0].outcome->code, Code::kFailedPrecondition);
  EXPECT_NE(r[0].outcome->message.find("rank 0 (host a) differs from ranks 1, 2, 3: 1 buckets here "
                                       "vs 2 on rank 1"),
            std::string::npos)
      << r[0].outcome->message;
}

TEST(FingerprintCheck, ASecondCheckWhileWaitingReplacesTheFirst) {
  FingerprintCheck check(2);
  CheckResult first, second, r0;
  check.submit(1, "rank 1 (host b)", mlp(), t0 + 5s, t0, first.cb());
  check.submit(1, "rank 1 (host b)", mlp(), t0 + 5s, t0, second.cb());
  ASSERT_TRUE(first.outcome);
  EXPECT_EQ(first.outcome->code, Code::kCancelled);
  EXPECT_FALSE(second.outcome);
  check.submit(0, "rank 0 (host a)", mlp(), t0 + 5s, t0, r0.cb());
  ASSERT_TRUE(second.outcome && r0.outcome);
  EXPECT_TRUE(second.outcome->ok() && r0.outcome->ok());
}

TEST(FingerprintCheck, TimesOutNamingTheRanksThatNeverValidated) {
  FingerprintCheck check(3);
  CheckResult r1;
  check.submit(1, "rank 1 (host b)", mlp(), t0 + 5s, t0, r1.cb());
  check.expire(t0 + 5s);
  ASSERT_TRUE(r1.outcome);
  EXPECT_EQ(r1.outcome->code, Code::kDeadlineExceeded);
  EXPECT_NE(r1.outcome->message.find("rank 1 (host b) waited 5.0 s for every rank's fingerprint: "
                                     "ranks 0, 2 have not validated their models"),
            std::string::npos)
      << r1.outcome->message;
}

}  // namespace
}  // namespace mddp::coordinator

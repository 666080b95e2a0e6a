// core/perf/timeline and the metrics record: records with a known answer.
#include "core/perf/timeline.h"

#include <gtest/gtest.h>

#include "core/common/check.h"

namespace mddp::perf {
namespace {

constexpr int64_t kMs = 1'000'000;  // ns

// A rank's record of one step: the step starts at `start_ms` (its own steady
// clock) and its phases take the given times; one bucket becomes ready 1 ms
// into backward and is all-reduced for 2 ms from the moment the last rank
// can join (`allreduce_start_ms`, on the common clock).
StepMetrics record(int rank, int64_t step, double start_ms, double data, double forward,
                   double backward, int64_t offset_ns = 0, double allreduce_start_ms = 50) {
  StepMetrics m;
  m.rank = rank;
  m.step = step;
  m.data_ms = data;
  m.forward_ms = forward;
  m.backward_ms = backward;
  m.optimizer_ms = 1;
  m.step_ms = data + forward + backward + 1;
  m.start_ns = static_cast<int64_t>(start_ms * kMs) - offset_ns;
  m.clock_offset_ns = offset_ns;
  const int64_t ready = m.start_ns + static_cast<int64_t>((data + forward + 1) * kMs);
  const int64_t start = static_cast<int64_t>(allreduce_start_ms * kMs) - offset_ns;
  m.buckets.push_back({0, 4 << 20, ready, ready, start, start + 2 * kMs});
  m.comm_bytes = 4 << 20;
  return m;
}

TEST(Timeline, NamesThePlantedStragglerAndItsPhase) {
  // Rank 2 of 4 spends 6 ms more in forward; the others are alike.
  std::vector<StepMetrics> step = {record(0, 7, 0, 1, 10, 10), record(1, 7, 0.1, 1, 10, 10),
                                   record(2, 7, 0, 1, 16, 10), record(3, 7, 0.2, 1, 10.3, 10)};
  const StepTimeline t = build_timeline(step, 4);
  ASSERT_TRUE(t.straggler);
  EXPECT_EQ(t.straggler->rank, 2);
  EXPECT_EQ(t.straggler->phase, "forward");
  EXPECT_NEAR(t.straggler->late_ms, 5.9, 1e-6);  // ready at 18 vs the others' median 12.1
  EXPECT_NEAR(t.straggler->excess_ms.at("forward"), 6.0, 1e-6);
}

TEST(Timeline, ALateStartIsNamedAsSuch) {
  std::vector<StepMetrics> step = {record(0, 1, 0, 1, 10, 10), record(1, 1, 4, 1, 10, 10)};
  const auto s = build_timeline(step, 2).straggler;
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->phase, "start");
  EXPECT_NEAR(s->late_ms, 4.0, 1e-6);  // against the punctual rank, not the midpoint
}

TEST(Timeline, AlignsRanksWhoseSteadyClocksDiffer) {
  // Rank 1's steady clock is 1 hour behind; its offset puts it back.
  const int64_t hour = 3600LL * 1000 * kMs;
  std::vector<StepMetrics> step = {record(0, 3, 0, 2, 10, 10, 5 * kMs),
                                   record(1, 3, 0, 2, 10, 10, hour)};
  const StepTimeline t = build_timeline(step, 2);
  ASSERT_EQ(t.ranks.size(), 2u);
  EXPECT_NEAR(t.ranks[0].start_ms, 0, 1e-9);
  EXPECT_NEAR(t.ranks[1].start_ms, 0, 1e-9);
  EXPECT_NEAR(t.ranks[1].buckets[0].ready_ms, 13, 1e-9);
  EXPECT_NEAR(t.ranks[1].buckets[0].start_ms, 50, 1e-9);
  EXPECT_NEAR(t.straggler->late_ms, 0, 1e-9);
  // Phases follow one another from the step's start.
  ASSERT_EQ(t.ranks[0].phases.size(), 5u);
  EXPECT_EQ(t.ranks[0].phases[1].name, "forward");
  EXPECT_NEAR(t.ranks[0].phases[1].start_ms, 2, 1e-9);
  EXPECT_NEAR(t.ranks[0].phases[2].end_ms, 22, 1e-9);
  // busbw of 4 MiB in 2 ms on 2 ranks: S/t * 2(n-1)/n = S/t.
  EXPECT_NEAR(t.ranks[0].buckets[0].busbw_gbps, (4 << 20) / 2e-3 * 1e-9, 1e-9);
}

TEST(Timeline, NoStragglerForOneRankOrWithoutCommunication) {
  EXPECT_FALSE(build_timeline({record(0, 1, 0, 1, 1, 1)}, 1).straggler);
  StepMetrics a = record(0, 1, 0, 1, 1, 1), b = record(1, 1, 0, 1, 1, 1);
  a.buckets.clear();
  b.buckets.clear();
  EXPECT_FALSE(build_timeline({a, b}, 2).straggler);
}

TEST(Timeline, CompleteStepsSkipsPartialDuplicateAndEvalRecords) {
  StepMetrics eval;
  eval.eval = true;
  eval.step = 1;
  std::vector<StepMetrics> records = {
      record(1, 2, 0, 1, 1, 1), record(0, 1, 0, 1, 1, 1), eval,
      record(1, 1, 0, 1, 1, 1), record(1, 1, 9, 1, 1, 1), record(0, 3, 0, 1, 1, 1)};
  const auto steps = complete_steps(records, 2);
  ASSERT_EQ(steps.size(), 1u);  // step 2 and 3 lack a rank
  ASSERT_EQ(steps[0].size(), 2u);
  EXPECT_EQ(steps[0][0].rank, 0);
  EXPECT_EQ(steps[0][1].rank, 1);
  EXPECT_EQ(steps[0][1].start_ns, 0);  // the first of the duplicates
}

TEST(Timeline, SummaryCountsLateStepsAndIgnoresNoise) {
  std::vector<StepTimeline> t;
  for (int s = 0; s < 10; ++s)
    t.push_back(
        build_timeline({record(0, s, 0, 1, 10, 10), record(1, s, 0, s < 7 ? 4 : 1, 10, 10)}, 2));
  t.push_back(build_timeline({record(0, 11, 0, 1, 10.1, 10), record(1, 11, 0, 1, 10, 10)},
                             2));  // 0.1 ms: noise
  const StragglerSummary s = summarize_stragglers(t, 0.5);
  EXPECT_EQ(s.steps, 11);
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].rank, 1);
  EXPECT_EQ(s.ranks[0].late_steps, 7);
  EXPECT_EQ(s.ranks[0].by_phase.at("data"), 7);
  ASSERT_TRUE(s.worst);
  EXPECT_EQ(s.worst->phase, "data");
  EXPECT_NEAR(s.worst->late_ms, 21, 1e-6);
}

TEST(StepMetricsJson, RoundTripsStepAndEvalRecords) {
  StepMetrics m = record(3, 42, 5, 1, 2, 3, 777);
  m.loss = 0.25;
  m.exposed_comm_ms = 0.5;
  m.total_comm_ms = 2;
  const StepMetrics back = StepMetrics::from_json(m.to_json());
  EXPECT_EQ(back.to_json(), m.to_json());
  EXPECT_EQ(back.clock_offset_ns, 777);
  StepMetrics e;
  e.eval = true;
  e.step = 9;
  e.eval_accuracy = 0.84;
  const StepMetrics eb = StepMetrics::from_json(e.to_json());
  EXPECT_TRUE(eb.eval);
  EXPECT_DOUBLE_EQ(eb.eval_accuracy, 0.84);
  EXPECT_FALSE(e.to_json().contains("eval_sample"));  // only a GPT on text has one
  e.eval_sample = "\nThe \"lamp\" \u00e9";
  EXPECT_EQ(StepMetrics::from_json(e.to_json()).eval_sample, e.eval_sample);
  nlohmann::json bad = e.to_json();
  bad["eval_sample"] = 3;
  EXPECT_THROW(StepMetrics::from_json(bad), InputError);
}

// Compression's fields (Note [Wire bytes]): the bytes, the collective and
// the round survive the log; a bad collective is named.
TEST(StepMetricsJson, RoundTripsCompressionFields) {
  StepMetrics m = record(1, 7, 0, 1, 2, 3, 0);
  m.comm_bytes = 300;
  m.grad_bytes = 4000;
  m.sent_bytes = 300;
  m.buckets.front().op = comm::SpanOp::kAllGather;
  m.buckets.front().round = 1;
  m.buckets.front().grad_bytes = 4000;
  m.buckets.front().sent_bytes = 300;
  const StepMetrics back = StepMetrics::from_json(m.to_json());
  EXPECT_EQ(back.to_json(), m.to_json());
  EXPECT_EQ(back.buckets.front().op, comm::SpanOp::kAllGather);
  EXPECT_EQ(back.buckets.front().round, 1);
  EXPECT_DOUBLE_EQ(back.compression_ratio(), 4000.0 / 300.0);
  nlohmann::json j = m.to_json();
  j["buckets"][0]["op"] = "scatter";
  EXPECT_THROW(StepMetrics::from_json(j), InputError);
}

TEST(StepMetricsJson, BadValuesNameTheKey) {
  try {
    StepMetrics::from_json({{"step", "seven"}});
    FAIL() << "accepted a string step";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'step'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(StepMetrics::from_json({{"kind", "lunch"}}), InputError);
  EXPECT_THROW(StepMetrics::from_json(nlohmann::json::array()), InputError);
  EXPECT_THROW(StepMetrics::from_json({{"buckets", 3}}), InputError);
}

}  // namespace
}  // namespace mddp::perf

// core/perf/collectives (the dashboard's Collectives view) and the
// algorithm steps in a metrics record, on records whose answer is known.
#include <gtest/gtest.h>

#include "core/common/check.h"
#include "core/perf/collectives.h"

namespace mddp::perf {
namespace {

constexpr int64_t kUs = 1000;  // ns

// Rank r of a 2-rank ring all-reduce of 8 bytes ... that started at
// `start_us` on its own clock (offset `offset_us` to the common one) and
// whose two steps took 10 us each.
StepMetrics ring_rank(int r, int64_t start_us, int64_t offset_us) {
  StepMetrics m;
  m.rank = r;
  m.step = 20;
  m.start_ns = start_us * kUs;
  m.clock_offset_ns = offset_us * kUs;
  comm::CommSpan b{.index = 0,
                   .bytes = 8,
                   .ready_ns = m.start_ns,
                   .launch_ns = m.start_ns,
                   .start_ns = m.start_ns,
                   .end_ns = m.start_ns + 20 * kUs};
  const int other = 1 - r;
  b.steps.push_back({.phase = comm::StepPhase::kReduceScatter,
                     .index = 0,
                     .send_peer = other,
                     .recv_peer = other,
                     .send_block = other,
                     .recv_block = r,
                     .send_bytes = 4,
                     .recv_bytes = 4,
                     .start_ns = m.start_ns,
                     .end_ns = m.start_ns + 10 * kUs});
  b.steps.push_back({.phase = comm::StepPhase::kAllGather,
                     .index = 0,
                     .send_peer = other,
                     .recv_peer = other,
                     .send_block = r,
                     .recv_block = other,
                     .send_bytes = 4,
                     .recv_bytes = 4,
                     .start_ns = m.start_ns + 10 * kUs,
                     .end_ns = m.start_ns + 20 * kUs});
  m.buckets.push_back(b);
  return m;
}

TEST(CollectivesView, GroupsEveryRanksStepsOnTheCommonClock) {
  // Rank 1's clock runs 100 us behind: after alignment both start at once.
  const StepCollectives c =
      build_collectives({ring_rank(1, 900, 100), ring_rank(0, 1000, 0)}, 2, "ring", std::nullopt);
  ASSERT_EQ(c.collectives.size(), 1u);
  const CollectiveView& v = c.collectives[0];
  EXPECT_EQ(v.algorithm, "ring");
  EXPECT_DOUBLE_EQ(v.start_ms, 0.0);
  EXPECT_DOUBLE_EQ(v.end_ms, 0.02);
  ASSERT_EQ(v.steps.size(), 2u);
  EXPECT_EQ(v.steps[0].phase, "reduce-scatter");
  EXPECT_EQ(v.steps[1].phase, "all-gather");
  ASSERT_EQ(v.steps[0].transfers.size(), 2u);
  EXPECT_EQ(v.steps[0].transfers[0].rank, 0);  // in rank order
  EXPECT_EQ(v.steps[0].transfers[0].to, 1);
  EXPECT_EQ(v.steps[0].transfers[0].send_block, 1);
  EXPECT_DOUBLE_EQ(v.steps[1].transfers[1].start_ms, 0.01);
  EXPECT_EQ(v.predicted_ms, 0.0);
  EXPECT_TRUE(to_json(c)["fit"].is_null());
  EXPECT_TRUE(to_json(c)["collective"]["predicted_ms"].is_null());
}

TEST(CollectivesView, PredictsEachStepAndTheWholeWithAFit) {
  const LinkFit fit{"shm", "ring", 2, {.alpha_s = 5e-6, .beta_Bps = 1e9}, 0.99};
  const StepCollectives c =
      build_collectives({ring_rank(0, 0, 0), ring_rank(1, 0, 0)}, 2, "ring", fit);
  const CollectiveView& v = c.collectives[0];
  // one step: alpha + its 4-byte block / beta; the whole: 2(n-1)(alpha + S/(n beta))
  EXPECT_NEAR(v.steps[0].predicted_ms, (5e-6 + 4 / 1e9) * 1e3, 1e-12);
  EXPECT_NEAR(v.predicted_ms, 2 * (5e-6 + 8 / 2e9) * 1e3, 1e-12);
  const auto j = to_json(c);
  EXPECT_EQ(j["buckets"][0]["steps"], 2);
  EXPECT_EQ(j["collective"]["steps"].size(), 2u);
  EXPECT_EQ(j["collective"]["steps"][0]["transfers"].size(), 2u);
  EXPECT_EQ(j["fit"]["alpha_s"], 5e-6);
}

// Rank r of a 3-rank ring's first step: it sends to r+1 and receives 1000
// bytes from r-1 between start_us and end_us (one clock for all).
StepMetrics ring_step(int r, int64_t start_us, int64_t end_us) {
  StepMetrics m;
  m.rank = r;
  m.step = 10;
  m.start_ns = 0;
  comm::CommSpan b{.index = 0, .bytes = 3000, .start_ns = start_us * kUs, .end_ns = end_us * kUs};
  b.steps.push_back({.phase = comm::StepPhase::kReduceScatter,
                     .index = 0,
                     .send_peer = (r + 1) % 3,
                     .recv_peer = (r + 2) % 3,
                     .send_bytes = 1000,
                     .recv_bytes = 1000,
                     .start_ns = start_us * kUs,
                     .end_ns = end_us * kUs});
  m.buckets.push_back(b);
  return m;
}

TEST(LinkRates, TheReceiverOnTheSlowLinkWaitsAndALateReceiverDoesNot) {
  // 0 -> 1 is slow: rank 1 waits 1 ms for its bytes. Rank 2 starts 500 us
  // late and has rank 1's bytes 10 us later: its lateness is not the link's;
  // rank 0 has rank 2's 20 us after rank 2 began sending them.
  const auto c =
      build_collectives({ring_step(0, 0, 520), ring_step(1, 0, 1000), ring_step(2, 500, 510)}, 3,
                        "ring", std::nullopt);
  std::vector<LinkRate> links;
  add_link_rates(c, links);
  add_link_rates(c, links);  // a second traced step adds to the same links
  sort_slowest_first(links);
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[0].from, 0);
  EXPECT_EQ(links[0].to, 1);
  EXPECT_EQ(links[0].bytes, 2000);
  EXPECT_EQ(links[0].transfers, 2);
  EXPECT_NEAR(links[0].wait_ms, 2.0, 1e-9);
  EXPECT_NEAR(links[0].gbps(), 1e-3, 1e-12);  // 2000 bytes in 2 ms
  EXPECT_EQ(links[1].from, 2);                // 2000 bytes in 40 us
  EXPECT_NEAR(links[1].gbps(), 0.05, 1e-9);
  EXPECT_EQ(links[2].from, 1);  // 2000 bytes in 20 us
  EXPECT_NEAR(links[2].wait_ms, 0.02, 1e-9);
  EXPECT_NEAR(links[2].gbps(), 0.1, 1e-9);
  const auto j = to_json(c)["links"];
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["from"], 0);
  EXPECT_EQ(j[0]["to"], 1);
  EXPECT_NEAR(j[0]["gbps"].get<double>(), 1e-3, 1e-12);
}

TEST(CollectivesView, AnUntracedStepHasNothingToShow) {
  StepMetrics m = ring_rank(0, 0, 0);
  m.buckets[0].steps.clear();
  const auto j = to_json(build_collectives({m}, 1, "auto", std::nullopt));
  EXPECT_TRUE(j["buckets"].empty());
  EXPECT_TRUE(j["collective"].is_null());
}

TEST(StepMetricsJson, CarriesTheAlgorithmStepsBothWays) {
  const StepMetrics m = ring_rank(1, 900, 100);
  const auto j = m.to_json();
  // times in the record are relative to the bucket's start
  EXPECT_EQ(j["buckets"][0]["steps"][1],
            nlohmann::json::parse(R"(["all-gather",0,0,1,0,0,4,4,10000,20000])"));
  const StepMetrics back = StepMetrics::from_json(j);
  ASSERT_EQ(back.buckets[0].steps.size(), 2u);
  const comm::AlgoStep& s = back.buckets[0].steps[1];
  EXPECT_EQ(s.phase, comm::StepPhase::kAllGather);
  EXPECT_EQ(s.send_block, 1);
  EXPECT_EQ(s.start_ns, m.buckets[0].steps[1].start_ns);
  EXPECT_EQ(s.end_ns, m.buckets[0].steps[1].end_ns);
}

TEST(StepMetricsJson, RejectsAMalformedStep) {
  auto j = ring_rank(0, 0, 0).to_json();
  j["buckets"][0]["steps"][0][0] = "sideways";
  EXPECT_THROW(StepMetrics::from_json(j), InputError);
  j["buckets"][0]["steps"][0] = nlohmann::json::array({"reduce", 0});
  try {
    StepMetrics::from_json(j);
    FAIL() << "a short step was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a bucket step should be [phase, index"),
              std::string::npos)
        << e.what();
  }
}

TEST(StepMetricsJson, TracesEveryTenthStepUpTo64Ranks) {
  EXPECT_TRUE(traced_step(10, 4));
  EXPECT_FALSE(traced_step(11, 4));
  EXPECT_TRUE(traced_step(0, 64));
  EXPECT_FALSE(traced_step(10, 65));
}

}  // namespace
}  // namespace mddp::perf

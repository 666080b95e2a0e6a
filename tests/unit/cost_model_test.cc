// core/perf/cost_model: the arithmetic against hand-computed values, the fit
// against alpha and beta planted in synthetic timings, and the fit file.
#include "core/perf/cost_model.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/common/check.h"

namespace mddp::perf {
namespace {

// 10 Gbit/s Ethernet (1.25e9 B/s) with 0.1 ms per message, `microddp model`'s
// default link; most cases below all-reduce 100 MB on 4 ranks over it.
const AlphaBeta kTenGbitLink{1e-4, 1.25e9};

TEST(CostModel, EveryFlatAlgorithmByHand) {
  // ring: 2(n-1)(a + S/(n b)) = 6 (1e-4 + 25e6/1.25e9) = 6 * 0.0201
  EXPECT_NEAR(allreduce_seconds("ring", 100e6, 4, kTenGbitLink), 0.1206, 1e-12);
  // tree: 2 ceil(log2 4)(a + S/b) = 4 (1e-4 + 0.08)
  EXPECT_NEAR(allreduce_seconds("tree", 100e6, 4, kTenGbitLink), 0.3204, 1e-12);
  // tree on 3 ranks: ceil(log2 3) = 2 rounds each way, as for 4
  EXPECT_NEAR(allreduce_seconds("tree", 100e6, 3, kTenGbitLink), 0.3204, 1e-12);
  // naive: 2(n-1)(a + S/b) = 6 (1e-4 + 0.08)
  EXPECT_NEAR(allreduce_seconds("naive", 100e6, 4, kTenGbitLink), 0.4806, 1e-12);
  // doubling: log2 4 = 2 exchanges of S: 2 (1e-4 + 0.08)
  EXPECT_NEAR(allreduce_seconds("doubling", 100e6, 4, kTenGbitLink), 0.1602, 1e-12);
  // on 3 ranks a fold-in, one exchange and a send-back; on 6 two exchanges and those two
  EXPECT_NEAR(allreduce_seconds("doubling", 100e6, 3, kTenGbitLink), 0.2403, 1e-12);
  EXPECT_NEAR(allreduce_seconds("doubling", 100e6, 6, kTenGbitLink), 0.3204, 1e-12);
  // two ranks: ring sends half the buffer each way, twice; doubling the whole buffer once
  EXPECT_NEAR(allreduce_seconds("doubling", 1e6, 2, {1e-5, 1e9}), 1e-5 + 1e-3, 1e-15);
  EXPECT_NEAR(allreduce_seconds("ring", 1e6, 2, {1e-5, 1e9}), 2 * (1e-5 + 0.5e-3), 1e-15);
  // direct: two signal rounds and the ring's bytes, 2a + 2(n-1) S/(n b) = 2e-4 + 1.5 * 0.08
  EXPECT_NEAR(allreduce_seconds("direct", 100e6, 4, kTenGbitLink), 0.1202, 1e-12);
  EXPECT_NEAR(allreduce_seconds("direct", 1e6, 2, {1e-5, 1e9}), 2e-5 + 1e-3, 1e-15);
  // nothing to send on one rank
  EXPECT_EQ(allreduce_seconds("ring", 100e6, 1, kTenGbitLink), 0.0);
  EXPECT_EQ(allreduce_seconds("direct", 100e6, 1, kTenGbitLink), 0.0);
  EXPECT_THROW(allreduce_seconds("butterfly", 1e6, 4, kTenGbitLink), InputError);
}

// Hierarchical, 2 hosts x 2 ranks, 100 MB: a ring of 2 within the host
// over a fast link, 2(2-1)(1 us + S/(2 x 10 GB/s)), and across hosts the
// two shard rings sharing the 10 Gbit/s link, 2(2-1)(a + S/(2 b)) — a third
// fewer bytes on the network link than the flat ring's 2(4-1)/4 S = 1.5 S.
TEST(CostModel, HierarchicalByHand) {
  const AlphaBeta host{1e-6, 1e10};
  const TwoLevelTime t = hierarchical_allreduce_seconds(100e6, 2, 2, host, kTenGbitLink);
  EXPECT_NEAR(t.host_s, 2 * (1e-6 + 50e6 / 1e10), 1e-12);
  EXPECT_NEAR(t.cross_s, 2 * (1e-4 + 50e6 / 1.25e9), 1e-12);
  EXPECT_NEAR(t.total(), t.host_s + t.cross_s, 1e-15);
  const double flat = allreduce_seconds("ring", 100e6, 4, kTenGbitLink);
  EXPECT_NEAR((flat - 6e-4) / (t.cross_s - 2e-4), 1.5,
              1e-9);  // the bandwidth terms: 1.5 S against 1.0 S
  // One host: only the host level; one rank per host: only the cross level.
  EXPECT_EQ(hierarchical_allreduce_seconds(1e6, 1, 4, host, kTenGbitLink).cross_s, 0.0);
  EXPECT_EQ(hierarchical_allreduce_seconds(1e6, 4, 1, host, kTenGbitLink).host_s, 0.0);
}

TEST(CostModel, BusBandwidthByHand) {
  // 1e9 bytes in 1 s on 4 ranks: algbw 1 GB/s, busbw 1 * 2*3/4 = 1.5 GB/s
  EXPECT_NEAR(bus_bandwidth_gbps(1e9, 1.0, 4), 1.5, 1e-12);
  // 2 ranks: busbw = algbw
  EXPECT_NEAR(bus_bandwidth_gbps(64e6, 0.032, 2), 2.0, 1e-12);
  // the ring's own prediction without latency runs at exactly beta
  const double t = allreduce_seconds("ring", 100e6, 8, {0, 1.25e9});
  EXPECT_NEAR(bus_bandwidth_gbps(100e6, t, 8), 1.25, 1e-12);
  EXPECT_EQ(bus_bandwidth_gbps(1e9, 0, 4), 0.0);
  EXPECT_EQ(bus_bandwidth_gbps(1e9, 1.0, 1), 0.0);
}

// The overlap regime: step = c(1 - f) + max(c f, t), exposed = max(0, t - c f).
// The what-if of docs/performance.md §1: 25M parameters (1e8 B), 400 ms of
// compute at n = 1 split over n ranks (strong), the 10 Gbit/s link; the ring
// times are 2(n-1)(0.1 ms + 1e8/(n 1.25e9)): 80.2, 120.6, 141.4 ms at n = 2, 4, 8.
TEST(CostModel, StepTimeWithAndWithoutOverlapByHand) {
  const double f = 2.0 / 3.0;
  // n = 2: c = 200 ms hides t = 80.2 ms behind c f = 133.3 ms: step = c, nothing exposed
  StepTime s = step_time(0.2, 0.0802, f);
  EXPECT_NEAR(s.step_s, 0.2, 1e-12);
  EXPECT_EQ(s.exposed_s, 0.0);
  EXPECT_EQ(s.overhead(), 0.0);
  // n = 4: c = 100 ms, c f = 66.67 ms < t = 120.6 ms: step = 100/3 + 120.6 = 153.933 ms,
  // exposed 120.6 - 66.667 = 53.933 ms, overhead 53.933 / 153.933 = 35.0 %
  s = step_time(0.1, 0.1206, f);
  EXPECT_NEAR(s.step_s, 0.1 / 3 + 0.1206, 1e-12);
  EXPECT_NEAR(s.exposed_s, 0.1206 - 0.2 / 3, 1e-12);
  EXPECT_NEAR(s.overhead(), 0.350368, 1e-6);
  // n = 8: c = 50 ms: step = 50/3 + 141.4 = 158.067 ms, overhead 108.067 / 158.067 = 68.4 %
  s = step_time(0.05, 0.1414, f);
  EXPECT_NEAR(s.step_s, 0.158067, 1e-6);
  EXPECT_NEAR(s.overhead(), 0.683678, 1e-6);
  // No overlap (f = 0): step = c + t; n = 4: 220.6 ms, overhead 120.6 / 220.6 = 54.7 %;
  // n = 8: 191.4 ms, 141.4 / 191.4 = 73.9 %
  s = step_time(0.1, 0.1206, 0);
  EXPECT_NEAR(s.step_s, 0.2206, 1e-12);
  EXPECT_NEAR(s.exposed_s, 0.1206, 1e-12);
  EXPECT_NEAR(s.overhead(), 0.546691, 1e-6);
  EXPECT_NEAR(step_time(0.05, 0.1414, 0).overhead(), 0.738767, 1e-6);
  // Weak scaling keeps c = 400 ms on every rank: at n = 4 overlap hides all of
  // t (c f = 266.7 ms), without it step = 520.6 ms and overhead 120.6 / 520.6 = 23.2 %
  s = step_time(0.4, 0.1206, f);
  EXPECT_NEAR(s.step_s, 0.4, 1e-12);
  EXPECT_EQ(s.exposed_s, 0.0);
  EXPECT_NEAR(step_time(0.4, 0.1206, 0).overhead(), 0.231656, 1e-6);
  // f = 1: everything may overlap, the step is the longer of the two
  EXPECT_NEAR(step_time(0.1, 0.3, 1).step_s, 0.3, 1e-12);
  EXPECT_NEAR(step_time(0.3, 0.1, 1).step_s, 0.3, 1e-12);
}

// Dense models of 1M, 5M and 20M parameters on 2 ranks over the 10 Gbit/s
// link, no overlap; 4 bytes per parameter; compute 6 x params x 32 samples
// per rank at 1e11 FLOP/s (an MLP). With compute in proportion to the
// parameters the overhead hardly moves with the size (63.9, 62.8, 62.6 %);
// an overhead of 60, 40 and 20 % would need the compute to grow 2.1-2.6x
// faster than the gradient from one size to the next.
TEST(CostModel, OverheadOfDenseModelsByHand) {
  struct Row {
    double params, target;  // target: an overhead to reach
    double ring_s;          // 2 (1e-4 + 4 params / (2 x 1.25e9))
    double compute_s;       // 6 x params x 32 / 1e11
    double overhead;        // ring / (ring + compute)
    double needed_s;        // the compute giving `target`: ring (1 - target) / target
  };
  const Row rows[] = {
      {1e6, 0.60, 2 * (1e-4 + 1.6e-3), 1.92e-3, 3.4 / 5.32, 3.4e-3 * 0.4 / 0.6},     // 63.9 %
      {5e6, 0.40, 2 * (1e-4 + 8e-3), 9.6e-3, 16.2 / 25.8, 16.2e-3 * 0.6 / 0.4},      // 62.8 %
      {20e6, 0.20, 2 * (1e-4 + 32e-3), 38.4e-3, 64.2 / 102.6, 64.2e-3 * 0.8 / 0.2},  // 62.6 %
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(str(r.params, " parameters"));
    const double ring = allreduce_seconds("ring", 4 * r.params, 2, kTenGbitLink);
    const double compute = dense_compute_seconds(r.params, 32, 100e9);
    EXPECT_NEAR(ring, r.ring_s, 1e-12);
    EXPECT_NEAR(compute, r.compute_s, 1e-12);
    EXPECT_NEAR(step_time(compute, ring, 0).overhead(), r.overhead, 1e-12);
    EXPECT_NEAR(compute_for_overhead(ring, r.target), r.needed_s, 1e-12);
    // the inverse: that compute gives exactly the target overhead
    EXPECT_NEAR(step_time(r.needed_s, ring, 0).overhead(), r.target, 1e-12);
  }
  // In round figures: 3.40 ms, 63.9 %, 2.27 ms; 16.20, 62.8 %, 24.30; 64.20, 62.6 %, 256.80
  EXPECT_NEAR(rows[0].ring_s, 3.40e-3, 1e-12);
  EXPECT_NEAR(rows[0].overhead, 0.639, 5e-4);
  EXPECT_NEAR(rows[0].needed_s, 2.267e-3, 1e-6);
  EXPECT_NEAR(rows[1].overhead, 0.628, 5e-4);
  EXPECT_NEAR(rows[1].needed_s, 24.30e-3, 1e-12);
  EXPECT_NEAR(rows[2].overhead, 0.626, 5e-4);
  EXPECT_NEAR(rows[2].needed_s, 256.80e-3, 1e-12);
  // The needed compute grows 24.3 / 2.267 = 10.72x and 256.8 / 24.3 = 10.57x
  // while the gradient grows 5x and 4x: 2.14x and 2.64x faster than the gradient.
  EXPECT_NEAR(rows[1].needed_s / rows[0].needed_s / 5, 2.1441, 1e-4);
  EXPECT_NEAR(rows[2].needed_s / rows[1].needed_s / 4, 2.6420, 1e-4);
}

// Three communication-bound steps: 4 ranks, 0.1 ms, MB = 2^20 B, no overlap.
// ring = 6 (1e-4 + S / (4 beta)), and S / (4 beta) is 0.2097152 ms in the
// first and 209.7152 ms in the other two (100x the bytes, or 10x the bytes
// over a 10x slower link). The overhead is communication over the whole step.
TEST(CostModel, CommunicationBoundStepsByHand) {
  struct Scenario {
    double mbytes, compute_s, gbps;
    double comm_s, comm_over_total;
  };
  const Scenario scenarios[] = {
      {1, 1e-3, 10, 6 * (1e-4 + 0.2097152e-3), 1.8582912 / 2.8582912},  // 65.0 %
      {1000, 0.1, 10, 6 * (1e-4 + 0.2097152), 1258.8912 / 1358.8912},   // 92.6 %
      {100, 0.05, 1, 6 * (1e-4 + 0.2097152), 1258.8912 / 1308.8912},    // 96.2 %
  };
  for (const Scenario& s : scenarios) {
    SCOPED_TRACE(str(s.mbytes, " MiB"));
    const double comm =
        allreduce_seconds("ring", s.mbytes * (1 << 20), 4, {1e-4, s.gbps * 1e9 / 8});
    EXPECT_NEAR(comm, s.comm_s, 1e-12);
    EXPECT_NEAR(step_time(s.compute_s, comm, 0).overhead(), s.comm_over_total, 1e-12);
  }
  EXPECT_NEAR(scenarios[0].comm_over_total, 0.650, 5e-4);
  EXPECT_NEAR(scenarios[1].comm_over_total, 0.926, 5e-4);
  EXPECT_NEAR(scenarios[2].comm_over_total, 0.962, 5e-4);
}

TEST(CostModel, DenseComputeAndTheOverheadInverse) {
  // 6 FLOPs x 1e6 parameters x 32 samples = 1.92e8 FLOPs at 1e11 FLOP/s = 1.92 ms
  EXPECT_NEAR(dense_compute_seconds(1e6, 32, 1e11), 1.92e-3, 1e-15);
  // 50 % overhead: compute equal to the communication; 100 %: no compute
  EXPECT_NEAR(compute_for_overhead(0.1, 0.5), 0.1, 1e-15);
  EXPECT_EQ(compute_for_overhead(0.1, 1.0), 0.0);
}

// Timings made from a planted link with +-3 % multiplicative noise over a
// 4 KiB .. 64 MiB sweep: the fit finds alpha and beta within 5 %.
TEST(CostModel, FitRecoversPlantedAlphaBeta) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  for (const std::string algo : {"ring", "tree", "naive", "doubling"})
    for (int n : {2, 4, 8})
      for (const AlphaBeta planted :
           {AlphaBeta{50e-6, 1.2e9}, AlphaBeta{2e-6, 8e9}, AlphaBeta{300e-6, 0.125e9}}) {
        std::vector<TimingSample> samples;
        for (double bytes = 4096; bytes <= 64.0 * (1 << 20); bytes *= 4)
          samples.push_back({bytes, allreduce_seconds(algo, bytes, n, planted) * noise(rng)});
        const AlphaBeta fit = fit_alpha_beta(algo, n, samples);
        SCOPED_TRACE(str(algo, " n=", n, " alpha ", planted.alpha_s, " beta ", planted.beta_Bps));
        EXPECT_NEAR(fit.alpha_s, planted.alpha_s, 0.05 * planted.alpha_s);
        EXPECT_NEAR(fit.beta_Bps, planted.beta_Bps, 0.05 * planted.beta_Bps);
        EXPECT_GT(fit_r2(algo, n, samples, fit), 0.99);
      }
}

TEST(CostModel, FitIsExactOnNoiselessTimings) {
  const AlphaBeta planted{20e-6, 3e9};
  std::vector<TimingSample> samples;
  for (double bytes : {1e3, 1e5, 1e7})
    samples.push_back({bytes, allreduce_seconds("ring", bytes, 4, planted)});
  const AlphaBeta fit = fit_alpha_beta("ring", 4, samples);
  EXPECT_NEAR(fit.alpha_s, planted.alpha_s, 1e-9 * planted.alpha_s);
  EXPECT_NEAR(fit.beta_Bps, planted.beta_Bps, 1e-9 * planted.beta_Bps);
  EXPECT_NEAR(fit_r2("ring", 4, samples, fit), 1.0, 1e-9);
}

TEST(CostModel, FitRejectsWhatCannotBeFitted) {
  EXPECT_THROW(fit_alpha_beta("ring", 4, {{1e6, 1e-3}}), InputError);  // one size
  EXPECT_THROW(fit_alpha_beta("ring", 4, {{1e6, 1e-3}, {1e6, 2e-3}}),
               InputError);  // one distinct size
  EXPECT_THROW(fit_alpha_beta("ring", 1, {{1e3, 1e-3}, {1e6, 2e-3}}), InputError);  // one rank
  EXPECT_THROW(fit_alpha_beta("ring", 4, {{1e3, 1e-3}, {1e6, 0.0}}), InputError);   // zero time
}

class FitFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("cost_model_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(FitFile, SaveLoadRoundTripReplacesSameKeyKeepsOthers) {
  const auto path = dir_ / "sub" / "fits.json";
  EXPECT_TRUE(load_fits(path).empty());  // absent: no fits yet
  save_fits(path,
            {{"tcp", "ring", 2, {12.5e-6, 1.5e9}, 0.998}, {"shm", "tree", 4, {3e-6, 9e9}, 0.97}});
  save_fits(path, {{"tcp", "ring", 2, {10e-6, 2e9}, 0.999}});  // replaces tcp/ring/2 only
  const auto fits = load_fits(path);
  ASSERT_EQ(fits.size(), 2u);
  const auto ring = find_fit(fits, "tcp", "ring", 2);
  ASSERT_TRUE(ring.has_value());
  EXPECT_NEAR(ring->link.alpha_s, 10e-6, 1e-15);
  EXPECT_NEAR(ring->link.beta_Bps, 2e9, 1e-3);
  EXPECT_NEAR(ring->r2, 0.999, 1e-12);
  const auto tree = find_fit(fits, "shm", "tree", 4);
  ASSERT_TRUE(tree.has_value());
  EXPECT_NEAR(tree->link.alpha_s, 3e-6, 1e-15);
  EXPECT_NEAR(tree->link.beta_Bps, 9e9, 1e-3);
  EXPECT_FALSE(find_fit(fits, "tcp", "ring", 4).has_value());
}

TEST_F(FitFile, BadFileIsAnInputErrorNamingThePath) {
  const auto path = dir_ / "bad.json";
  const auto fit = [](const std::string& fields) {
    return R"({"fits": [{"transport": "tcp", "algorithm": "ring", )" + fields + "}]}";
  };
  const std::vector<std::string> texts{
      "not json", R"({"fits": [{"transport": "tcp"}]})", "{}",
      // Numbers that do not fit (1e10 ranks was undefined behaviour, 2.5
      // and -2 converted silently), and links that predict nothing.
      fit(R"("world_size": 1e10, "alpha_us": 1, "beta_gbps": 1)"),
      fit(R"("world_size": 2.5, "alpha_us": 1, "beta_gbps": 1)"),
      fit(R"("world_size": -2, "alpha_us": 1, "beta_gbps": 1)"),
      fit(R"("world_size": 2, "alpha_us": -1, "beta_gbps": 1)"),
      fit(R"("world_size": 2, "alpha_us": 1, "beta_gbps": 0)"),
      fit(R"("world_size": 2, "alpha_us": "1", "beta_gbps": 1)"),
      fit(R"("world_size": 2, "alpha_us": 1e300, "beta_gbps": 1)"),
      R"({"fits": [{"transport": "tcp", "algorithm": "butterfly", "world_size": 2, )"
      R"("alpha_us": 1, "beta_gbps": 1}]})"};
  for (const std::string& text : texts) {
    std::ofstream(path) << text;
    try {
      load_fits(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
}

TEST_F(FitFile, DefaultPathFollowsTheEnvironment) {
  ::setenv("MICRODDP_FIT_FILE", (dir_ / "x.json").c_str(), 1);
  EXPECT_EQ(default_fit_path(), dir_ / "x.json");
  ::unsetenv("MICRODDP_FIT_FILE");
  ::setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  EXPECT_EQ(default_fit_path(), dir_ / "microddp/alpha_beta.json");
  ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace mddp::perf

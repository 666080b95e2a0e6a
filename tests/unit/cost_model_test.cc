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

// The seeds' worked example: 100 MB on 4 ranks, 10 Gbit/s (1.25e9 B/s), 0.1 ms.
const AlphaBeta kSeedLink{1e-4, 1.25e9};

TEST(CostModel, RingTreeNaiveByHand) {
  // ring: 2(n-1)(a + S/(n b)) = 6 (1e-4 + 25e6/1.25e9) = 6 * 0.0201
  EXPECT_NEAR(allreduce_seconds("ring", 100e6, 4, kSeedLink), 0.1206, 1e-12);
  // tree: 2 ceil(log2 4)(a + S/b) = 4 (1e-4 + 0.08)
  EXPECT_NEAR(allreduce_seconds("tree", 100e6, 4, kSeedLink), 0.3204, 1e-12);
  // tree on 3 ranks: ceil(log2 3) = 2 rounds each way, as for 4
  EXPECT_NEAR(allreduce_seconds("tree", 100e6, 3, kSeedLink), 0.3204, 1e-12);
  // naive: 2(n-1)(a + S/b) = 6 (1e-4 + 0.08)
  EXPECT_NEAR(allreduce_seconds("naive", 100e6, 4, kSeedLink), 0.4806, 1e-12);
  // two ranks: ring sends half the buffer each way, twice
  EXPECT_NEAR(allreduce_seconds("ring", 1e6, 2, {1e-5, 1e9}), 2 * (1e-5 + 0.5e-3), 1e-15);
  // nothing to send on one rank
  EXPECT_EQ(allreduce_seconds("ring", 100e6, 1, kSeedLink), 0.0);
  EXPECT_THROW(allreduce_seconds("butterfly", 1e6, 4, kSeedLink), InputError);
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

// Timings made from a planted link with +-3 % multiplicative noise over a
// 4 KiB .. 64 MiB sweep: the fit finds alpha and beta within 5 %.
TEST(CostModel, FitRecoversPlantedAlphaBeta) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  for (const std::string algo : {"ring", "tree", "naive"})
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
  for (const char* text : {"not json", "{\"fits\": [{\"transport\": \"tcp\"}]}", "{}"}) {
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

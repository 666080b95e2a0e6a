// The pieces of --compress that need no second rank, against independent
// references: the spelling, top-k selection (against a full sort), and
// PowerSGD's orthonormalisation (against Gram-Schmidt in double precision).
// The collectives' side is in tests/ddp/ddp_compression_test.cc.
#include "core/ddp/compression.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/common/check.h"
#include "core/common/rng.h"
#include "core/ddp/powersgd.h"
#include "core/ddp/topk.h"

namespace mddp::ddp {
namespace {

TEST(CompressionSpec, ReadsEveryKindAndPrintsItBack) {
  EXPECT_EQ(parse_compression("none").kind, CompressionKind::kNone);
  EXPECT_EQ(parse_compression("bf16").kind, CompressionKind::kBf16);
  const Compression t = parse_compression("topk:0.01");
  EXPECT_EQ(t.kind, CompressionKind::kTopK);
  EXPECT_DOUBLE_EQ(t.ratio, 0.01);
  EXPECT_EQ(to_string(t), "topk:0.01");
  const Compression p = parse_compression("powersgd:4");
  EXPECT_EQ(p.kind, CompressionKind::kPowerSgd);
  EXPECT_EQ(p.rank, 4);
  EXPECT_EQ(to_string(p), "powersgd:4");
}

TEST(CompressionSpec, RefusesBadSpellingsNamingTheFlag) {
  for (const char* bad :
       {"", "topk", "topk:", "topk:0", "topk:1.5", "topk:-0.1", "topk:nan", "topk:0.1x",
        "powersgd:0", "powersgd:2.5", "powersgd:", "powersgd:99999", "zip", "fp16:2"}) {
    try {
      parse_compression(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--compress '"), std::string::npos) << e.what();
    }
  }
}

TEST(TopK, CountIsCeilOfTheRatioAtLeastOne) {
  EXPECT_EQ(top_k_count(1000, 0.01), 10);
  EXPECT_EQ(top_k_count(1001, 0.01), 11);
  EXPECT_EQ(top_k_count(5, 0.01), 1);
  EXPECT_EQ(top_k_count(7, 1.0), 7);
}

// Reference: a stable sort of all indices by magnitude, NaN first.
std::vector<int32_t> reference_top_k(const std::vector<float>& x, int64_t k) {
  std::vector<int32_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  const auto key = [&](int32_t i) {
    return std::isnan(x[i]) ? std::numeric_limits<float>::infinity() : std::fabs(x[i]);
  };
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return key(a) > key(b); });
  idx.resize(static_cast<std::size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

TEST(TopK, PicksTheLargestMagnitudesLowestIndexOnTies) {
  Rng rng(7);
  std::vector<int32_t> got;
  std::vector<float> scratch;
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng.next_u64() % 300);
    std::vector<float> x(static_cast<std::size_t>(n));
    // Few distinct values, both signs: many ties across the threshold.
    for (float& v : x) v = static_cast<float>(static_cast<int>(rng.next_u64() % 9) - 4);
    if (trial % 5 == 0) x[static_cast<std::size_t>(rng.next_u64() % n)] = std::nanf("");
    for (int64_t k : {int64_t{1}, (n + 2) / 3, n}) {
      select_top_k(x.data(), n, k, got, scratch);
      EXPECT_EQ(got, reference_top_k(x, k)) << "n " << n << " k " << k;
    }
  }
}

// Large buckets take the sampled threshold (Note [Sampled threshold] in
// topk.cc): still exactly the full sort's answer, for smooth data, heavy
// ties, a few spikes, and a sample that sees only the large entries (which
// must fall back to the full selection).
TEST(TopK, SampledThresholdGivesExactlyTheFullSelection) {
  const int64_t n = 40960;  // stride 10 over the 4096-entry sample
  Rng rng(3);
  std::vector<std::pair<std::string, std::vector<float>>> cases;
  std::vector<float> smooth(n), ties(n), spikes(n, 0.0f), fooled(n, 1.0f);
  for (float& v : smooth) v = rng.normal();
  for (float& v : ties) v = static_cast<float>(static_cast<int>(rng.next_u64() % 7) - 3);
  for (int j = 0; j < 50; ++j) spikes[rng.next_u64() % n] = 1000.0f + j;
  for (int64_t i = 0; i < n; i += 10) fooled[i] = 100.0f;  // exactly the sampled entries are large
  cases = {{"smooth", smooth}, {"ties", ties}, {"spikes", spikes}, {"fooled", fooled}};
  std::vector<int32_t> got;
  std::vector<float> scratch;
  for (const auto& [name, x] : cases)
    for (int64_t k : {int64_t{1}, int64_t{410}, int64_t{8000}, n / 4}) {
      select_top_k(x.data(), n, k, got, scratch);
      EXPECT_EQ(got, reference_top_k(x, k)) << name << " k " << k;
    }
}

// Gram-Schmidt in double on a double copy: the reference.
std::vector<double> reference_orthonormal(std::vector<double> a, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t p = 0; p < j; ++p) {
        double dot = 0;
        for (int64_t i = 0; i < rows; ++i) dot += a[i * cols + p] * a[i * cols + j];
        for (int64_t i = 0; i < rows; ++i) a[i * cols + j] -= dot * a[i * cols + p];
      }
    double norm = 0;
    for (int64_t i = 0; i < rows; ++i) norm += a[i * cols + j] * a[i * cols + j];
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < rows; ++i) a[i * cols + j] = norm > 0 ? a[i * cols + j] / norm : 0;
  }
  return a;
}

TEST(PowerSgd, OrthonormalisationMatchesADoublePrecisionReference) {
  Rng rng(11);
  for (auto [rows, cols] :
       {std::pair{64, 1}, std::pair{64, 4}, std::pair{300, 8}, std::pair{9, 9}}) {
    std::vector<float> a(static_cast<std::size_t>(rows * cols));
    for (float& v : a) v = rng.normal();
    // Nearly dependent columns, as a gradient's P often has: the last column
    // is the first plus a little noise.
    if (cols > 1)
      for (int64_t i = 0; i < rows; ++i)
        a[i * cols + cols - 1] = a[i * cols] + 1e-3f * rng.normal();
    const std::vector<double> want =
        reference_orthonormal(std::vector<double>(a.begin(), a.end()), rows, cols);
    orthonormalize_columns(a.data(), rows, cols);
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - want[i]));
    // A nearly dependent column loses ~3 digits to cancellation in fp32.
    EXPECT_LE(worst, cols > 1 ? 2e-3 : 1e-6) << rows << "x" << cols;
    for (int64_t p = 0; p < cols; ++p)
      for (int64_t q = 0; q < cols; ++q) {
        double dot = 0;
        for (int64_t i = 0; i < rows; ++i)
          dot += static_cast<double>(a[i * cols + p]) * a[i * cols + q];
        EXPECT_NEAR(dot, p == q ? 1.0 : 0.0, 1e-5)
            << rows << "x" << cols << " columns " << p << ", " << q;
      }
  }
}

TEST(PowerSgd, AZeroColumnStaysZeroInsteadOfNaN) {
  std::vector<float> a = {1, 0, 0, 0, 0, 0};  // [3, 2]: column 1 is zero
  orthonormalize_columns(a.data(), 3, 2);
  EXPECT_EQ(a, (std::vector<float>{1, 0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace mddp::ddp

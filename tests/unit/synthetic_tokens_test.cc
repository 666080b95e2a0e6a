// core/data/synthetic_tokens.h: the GPT's synthetic data has a text
// dataset's layout (x [B, block], y the same windows one token later), its
// chain is the one documented (three distinct successors, odds 0.7, 0.2,
// 0.1), and it is reproducible from the seed, with train and test splits
// drawn from one chain.
#include "core/data/synthetic_tokens.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "core/common/check.h"
#include "core/data/factory.h"

namespace mddp::data {
namespace {

using tensor::Tensor;

// The batch of samples `indices` as (x, y) host vectors.
std::pair<std::vector<float>, std::vector<float>> batch(const Dataset& d,
                                                        const std::vector<int64_t>& indices) {
  const int64_t b = static_cast<int64_t>(indices.size()), t = d.sample_shape()[0];
  Tensor x = Tensor::empty({b, t}), y = Tensor::empty({b, t});
  d.get_batch(indices, x, y);
  return {x.to_vector(), y.to_vector()};
}

// Targets are the next token: y[b][t] = x[b][t + 1], and the last one the next window's first.
TEST(SyntheticTokens, TargetsAreTheInputsShiftedByOneToken) {
  const SyntheticTokens d(50, 8, 11, 1, 2);
  EXPECT_EQ(d.sample_shape(), (tensor::Shape{8}));
  EXPECT_EQ(d.targets_per_sample(), 8);
  EXPECT_EQ(d.num_classes(), 11);
  EXPECT_EQ(d.target_dim(), 0);
  const std::vector<int64_t> idx = {7, 0, 49, 7};
  const auto [x, y] = batch(d, idx);
  for (std::size_t b = 0; b < idx.size(); ++b)
    for (int64_t t = 0; t < 8; ++t) {
      const int64_t pos = idx[b] * 8 + t;
      ASSERT_EQ(x[b * 8 + t], static_cast<float>(d.token(pos)));
      ASSERT_EQ(y[b * 8 + t], static_cast<float>(d.token(pos + 1)));
      ASSERT_GE(x[b * 8 + t], 0.0f);
      ASSERT_LT(x[b * 8 + t], 11.0f);
    }
}

// Every token is followed by at most three others, the likeliest ~70% of the time.
TEST(SyntheticTokens, EachTokenHasThreeSuccessorsAtTheDocumentedOdds) {
  const int64_t vocab = 5, n = 4000, block = 16;
  const SyntheticTokens d(n, block, vocab, 3, 4);
  std::map<int, std::map<int, int64_t>> next;
  for (int64_t i = 0; i < n * block; ++i) ++next[d.token(i)][d.token(i + 1)];
  ASSERT_EQ(next.size(), static_cast<std::size_t>(vocab));
  for (const auto& [token, counts] : next) {
    EXPECT_LE(counts.size(), 3u) << "token " << token;
    std::vector<int64_t> c;
    for (const auto& [succ, k] : counts) c.push_back(k);
    std::sort(c.rbegin(), c.rend());
    const double total = static_cast<double>(std::accumulate(c.begin(), c.end(), int64_t{0}));
    EXPECT_NEAR(c[0] / total, 0.7, 0.05) << "token " << token;
  }
  EXPECT_NEAR(SyntheticTokens::entropy(), 0.8018, 1e-4);
}

// One seed, one stream; the splits share the chain (the same likeliest
// successor of every token) but not the stream.
TEST(SyntheticTokens, ReproducibleAndSplitsShareTheChain) {
  DatasetConfig cfg{.spec = "synthetic-tokens", .synthetic_size = 300, .classes = 6, .seed = 9};
  cfg.block = 10;
  auto train = make_dataset(cfg, Split::kTrain), again = make_dataset(cfg, Split::kTrain);
  auto test = make_dataset(cfg, Split::kTest);
  EXPECT_EQ(train->size(), 300);
  EXPECT_EQ(test->size(), 75);
  EXPECT_EQ(train->sample_shape(), (tensor::Shape{10}));
  EXPECT_EQ(batch(*train, {0, 5}), batch(*again, {0, 5}));
  EXPECT_NE(batch(*train, {0, 5}).first, batch(*test, {0, 5}).first);
  const auto likeliest = [](const Dataset& d) {
    const auto& s = dynamic_cast<const SyntheticTokens&>(d);
    std::map<int, std::map<int, int64_t>> next;
    for (int64_t i = 0; i < s.size() * 10; ++i) ++next[s.token(i)][s.token(i + 1)];
    std::map<int, int> out;
    for (const auto& [token, counts] : next)
      out[token] = std::max_element(counts.begin(), counts.end(), [](auto& a, auto& b) {
                     return a.second < b.second;
                   })->first;
    return out;
  };
  EXPECT_EQ(likeliest(*train), likeliest(*test));
}

TEST(SyntheticTokens, BadSizesAreInputErrors) {
  EXPECT_THROW(SyntheticTokens(10, 8, 2, 1, 1), InputError);  // a vocabulary below 3
  EXPECT_THROW(SyntheticTokens(0, 8, 10, 1, 1), InputError);
  EXPECT_THROW(SyntheticTokens(10, 0, 10, 1, 1), InputError);
}

}  // namespace
}  // namespace mddp::data

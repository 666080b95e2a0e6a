// Generation (core/nn/generate.h): greedy decoding against an argmax taken
// by hand over the model's own logits, with the context cropped to the
// block by hand; top-k 1 and temperature 0 as greedy; a seed's
// reproducibility; and sample_token's distribution on logits the test
// chooses: top-k keeps exactly the k largest, and the frequencies follow
// softmax(l / T).
#include "core/nn/generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/common/check.h"
#include "tests/unit/gradcheck.h"

namespace mddp::test {
namespace {

constexpr int64_t kVocab = 7, kBlock = 6;

// A tiny GPT with weights large enough that its logits differ clearly.
std::unique_ptr<nn::Gpt> generation_gpt(float dropout = 0.0f) {
  Rng rng(5);
  auto gpt = std::make_unique<nn::Gpt>(
      nn::GptConfig{
          .vocab = kVocab, .block = kBlock, .layers = 2, .heads = 2, .embd = 8, .dropout = dropout},
      rng);
  for (nn::Parameter* p : gpt->parameters())
    if (p->value.ndim() == 2) p->value.copy_from(random_values(p->value.numel(), rng, -1, 1));
  return gpt;
}

// The reference: the last row of the logits of the last kBlock ids, its
// argmax found with a loop (the first largest), appended; `tokens` times.
std::vector<int64_t> greedy_by_hand(nn::Gpt& gpt, std::vector<int64_t> context, int64_t tokens) {
  gpt.set_dropout(false, 0);
  std::vector<int64_t> out;
  for (int64_t n = 0; n < tokens; ++n) {
    const auto first =
        static_cast<int64_t>(context.size()) > kBlock ? context.end() - kBlock : context.begin();
    const std::vector<float> window(first, context.end());
    const auto t = static_cast<int64_t>(window.size());
    const std::vector<float> logits = gpt.forward(Tensor::from_vector({1, t}, window)).to_vector();
    int64_t best = 0;
    for (int64_t v = 1; v < kVocab; ++v)
      if (logits[(t - 1) * kVocab + v] > logits[(t - 1) * kVocab + best]) best = v;
    context.push_back(best);
    out.push_back(best);
  }
  return out;
}

TEST(Generate, GreedyIsTheArgmaxOfTheLastPositionOverTheCroppedContext) {
  const auto owner = generation_gpt();
  nn::Gpt& gpt = *owner;
  // 12 tokens from a context of 2: the window fills up and then slides.
  const std::vector<int64_t> expected = greedy_by_hand(gpt, {3, 1}, 12);
  Rng rng(1);
  EXPECT_EQ(nn::generate(gpt, {3, 1}, 12, {.temperature = 0.0f}, rng), expected);
  // Greedy does not depend on the seed, and top-k 1 is greedy at any temperature.
  Rng other(2);
  EXPECT_EQ(nn::generate(gpt, {3, 1}, 12, {.temperature = 1.5f, .top_k = 1}, other), expected);
  // The output is not constant (a model that always says one token would pass trivially).
  EXPECT_NE(std::count(expected.begin(), expected.end(), expected.front()), 12);
}

TEST(Generate, AContextLongerThanTheBlockIsCroppedToItsLastBlockTokens) {
  const auto owner = generation_gpt();
  nn::Gpt& gpt = *owner;
  const std::vector<int64_t> context = {3, 3, 3, 3, 3, 3, 0, 6, 0, 6};  // 10 > kBlock
  const std::vector<int64_t> expected = greedy_by_hand(gpt, context, 3);
  // The first kBlock tokens would give another next token: the crop is observable.
  const std::vector<int64_t> head(context.begin(), context.begin() + kBlock);
  ASSERT_NE(greedy_by_hand(gpt, head, 1).front(), expected.front());
  Rng rng(1);
  EXPECT_EQ(nn::generate(gpt, context, 3, {.temperature = 0.0f}, rng), expected);
}

TEST(Generate, RunsWithoutDropoutWhateverTheModelWasDoing) {
  const auto owner = generation_gpt(0.5f);
  nn::Gpt& gpt = *owner;
  const std::vector<int64_t> expected = greedy_by_hand(gpt, {2}, 8);
  gpt.set_dropout(true, 99);  // training mode, as the trainer leaves it
  Rng rng(1);
  EXPECT_EQ(nn::generate(gpt, {2}, 8, {.temperature = 0.0f}, rng), expected);
}

TEST(Generate, TheSameSeedGivesTheSameTokensAnotherSeedOthers) {
  const auto owner = generation_gpt();
  nn::Gpt& gpt = *owner;
  const auto run = [&](uint64_t seed) {
    Rng rng(seed);
    return nn::generate(gpt, {4}, 30, {.temperature = 2.0f}, rng);
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(SampleToken, TemperatureZeroIsTheArgmaxAndTiesGoToTheLowestId) {
  Rng rng(1);
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(nn::sample_token(logits, {.temperature = 0.0f}, rng), 1);
  EXPECT_EQ(nn::sample_token(logits, {.temperature = 1.0f, .top_k = 1}, rng), 1);
}

// Draw counts of each id over `n` draws.
std::vector<int64_t> draw_counts(const std::vector<float>& logits, const nn::SamplingOptions& o,
                                 int64_t n) {
  Rng rng(11);
  std::vector<int64_t> counts(logits.size(), 0);
  for (int64_t i = 0; i < n; ++i)
    ++counts[static_cast<std::size_t>(nn::sample_token(logits, o, rng))];
  return counts;
}

TEST(SampleToken, TopKDrawsOnlyAmongTheKLargestLogits) {
  // The two largest are ids 1 and 3; at a high temperature the others would be likely.
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 4.0f, 3.0f, -2.0f};
  const std::vector<int64_t> counts = draw_counts(logits, {.temperature = 10.0f, .top_k = 2}, 4000);
  for (std::size_t i : {0u, 2u, 4u, 5u}) EXPECT_EQ(counts[i], 0) << "id " << i;
  EXPECT_GT(counts[1], 1000);
  EXPECT_GT(counts[3], 1000);
  // Without the filter every id is drawn.
  for (int64_t c : draw_counts(logits, {.temperature = 10.0f}, 4000)) EXPECT_GT(c, 0);
}

TEST(SampleToken, FrequenciesFollowTheSoftmaxOfLogitsOverTemperature) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f};
  for (float temperature : {0.5f, 1.0f, 3.0f}) {
    SCOPED_TRACE(str("temperature ", temperature));
    constexpr int64_t kDraws = 40000;
    const std::vector<int64_t> counts = draw_counts(logits, {.temperature = temperature}, kDraws);
    double z = 0;
    for (float l : logits) z += std::exp(l / temperature);
    for (std::size_t i = 0; i < logits.size(); ++i) {
      const double p = std::exp(logits[i] / temperature) / z;
      const double sigma = std::sqrt(kDraws * p * (1 - p));  // binomial
      EXPECT_NEAR(static_cast<double>(counts[i]), kDraws * p, 5 * sigma + 1) << "id " << i;
    }
  }
}

}  // namespace
}  // namespace mddp::test

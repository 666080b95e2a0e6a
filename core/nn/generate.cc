#include "core/nn/generate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/common/check.h"

namespace mddp::nn {
namespace {

// The first largest logit: ties go to the lowest id, so greedy is deterministic.
int64_t argmax_id(std::span<const float> logits) {
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

// The k-th largest logit: those below it are filtered out (-inf: none is).
float top_k_threshold(std::span<const float> logits, int64_t k) {
  if (k <= 0 || k >= static_cast<int64_t>(logits.size()))
    return -std::numeric_limits<float>::infinity();
  std::vector<float> sorted(logits.begin(), logits.end());
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
  return sorted[static_cast<std::size_t>(k - 1)];
}

}  // namespace

int64_t sample_token(std::span<const float> logits, const SamplingOptions& o, Rng& rng) {
  MDDP_CHECK(!logits.empty(), "no logits to sample from");
  MDDP_CHECK(o.temperature >= 0.0f && o.top_k >= 0, "temperature ", o.temperature, " and top-k ",
             o.top_k, " must be >= 0");
  if (o.temperature == 0.0f || o.top_k == 1) return argmax_id(logits);
  const float threshold = top_k_threshold(logits, o.top_k);
  const float top = logits[static_cast<std::size_t>(argmax_id(logits))];
  // softmax(l / T) over the kept logits, unnormalised and in double: the
  // largest weight is exp(0) = 1, so a small temperature cannot overflow.
  std::vector<double> weight(logits.size(), 0.0);
  double total = 0;
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (logits[i] >= threshold)
      total += weight[i] = std::exp(static_cast<double>(logits[i] - top) / o.temperature);
  // One uniform draw in [0, total) with 53 bits, walked through the cumulative weights.
  double u = static_cast<double>(rng.next_u64() >> 11) * 0x1.0p-53 * total;
  int64_t last_kept = argmax_id(logits);
  for (std::size_t i = 0; i < weight.size(); ++i) {
    if (weight[i] == 0.0) continue;
    last_kept = static_cast<int64_t>(i);
    u -= weight[i];
    if (u < 0) return last_kept;
  }
  return last_kept;  // u's rounding ran past the end: the last kept token
}

std::vector<int64_t> generate(Gpt& model, std::vector<int64_t> context, int64_t tokens,
                              const SamplingOptions& o, Rng& rng) {
  MDDP_CHECK(!context.empty(), "generation needs a context of at least one token");
  MDDP_CHECK(tokens >= 0, "a negative number of tokens: ", tokens);
  model.set_dropout(false, 0);
  const int64_t block = model.config().block, vocab = model.config().vocab;
  const tensor::Device device = model.parameters().front()->value.device();
  std::vector<int64_t> out;
  out.reserve(static_cast<std::size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t t = std::min<int64_t>(block, static_cast<int64_t>(context.size()));
    const std::vector<float> window(context.end() - t, context.end());  // ids as floats
    const Tensor ids = Tensor::from_vector({1, t}, window, device);
    const Tensor& logits = model.forward(ids);
    const std::vector<float> last = logits.view((t - 1) * vocab, {vocab}).to_vector();
    const int64_t next = sample_token(last, o, rng);
    context.push_back(next);
    out.push_back(next);
  }
  return out;
}

}  // namespace mddp::nn

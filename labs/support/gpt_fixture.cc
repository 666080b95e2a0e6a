#include "labs/support/gpt_fixture.h"

#include "core/common/rng.h"
#include "core/nn/loss.h"

namespace mddp::labs {
namespace {

constexpr int64_t kGptTokens = 5;

// Sequences [first, first + count) of the fixed batch of `total`.
void gpt_backward_on(nn::Gpt& model, int64_t first, int64_t count, int64_t total) {
  const int64_t vocab = model.config().vocab;
  Rng rng(2000);  // the whole batch, the same on every rank; then the sequences wanted
  std::vector<float> ids(static_cast<std::size_t>(total * kGptTokens)), next(ids.size());
  for (float& v : ids) v = static_cast<float>(rng.below(static_cast<uint64_t>(vocab)));
  for (float& v : next) v = static_cast<float>(rng.below(static_cast<uint64_t>(vocab)));
  const auto rows = [&](const std::vector<float>& all) {
    return std::vector<float>(all.begin() + first * kGptTokens,
                              all.begin() + (first + count) * kGptTokens);
  };
  const auto x = tensor::Tensor::from_vector({count, kGptTokens}, rows(ids));
  const auto y = tensor::Tensor::from_vector({count * kGptTokens}, rows(next));
  nn::CrossEntropyLoss loss;
  loss.forward(model.forward(x), y);
  model.backward(loss.backward(), false);
}

Grads gpt_grads_after(int64_t first, int64_t count, int64_t total) {
  auto model = tied_gpt();
  model->zero_grad();
  gpt_backward_on(*model, first, count, total);
  return grads_of(*model);
}

}  // namespace

std::unique_ptr<nn::Gpt> tied_gpt() {
  Rng rng(42);
  return std::make_unique<nn::Gpt>(
      nn::GptConfig{.vocab = 11, .block = kGptTokens, .layers = 1, .heads = 2, .embd = 8}, rng);
}

void gpt_backward_shard(nn::Gpt& model, int rank, int world) {
  gpt_backward_on(model, rank * kSequencesPerRank, kSequencesPerRank, world * kSequencesPerRank);
}

Grads gpt_whole_batch_grads(int world) {
  return gpt_grads_after(0, world * kSequencesPerRank, world * kSequencesPerRank);
}

Grads gpt_shard_grads(int rank, int world) {
  return gpt_grads_after(rank * kSequencesPerRank, kSequencesPerRank, world * kSequencesPerRank);
}

}  // namespace mddp::labs

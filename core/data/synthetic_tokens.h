// A synthetic token stream for the GPT (--dataset synthetic-tokens), with a
// known answer: one long sequence drawn from a fixed random Markov chain over
// `vocab` tokens, in which every token is followed by one of three distinct
// successors of its own, with probabilities 0.7, 0.2 and 0.1. Sample i is the
// window [i*block, (i+1)*block) of the stream and its targets the same window
// shifted by one token, the layout of a text dataset (Dataset::
// targets_per_sample() is `block`). A model that learns the chain brings the
// loss down from ln(vocab) to the chain's entropy, entropy() = 0.80 nats.
//
// Like the other synthetic sets, everything is generated once from mddp::Rng:
// the chain from `chain_seed` (shared by the train and test splits), the
// stream from `seed`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/data/dataset.h"

namespace mddp::data {

class SyntheticTokens final : public Dataset {
 public:
  // n samples of `block` tokens from a chain over `vocab` tokens (at least 3).
  SyntheticTokens(int64_t n, int64_t block, int64_t vocab, uint64_t seed, uint64_t chain_seed);

  int64_t size() const override { return n_; }
  tensor::Shape sample_shape() const override { return {block_}; }
  int64_t target_dim() const override { return 0; }
  int64_t num_classes() const override { return vocab_; }
  int64_t targets_per_sample() const override { return block_; }
  std::string name() const override { return "synthetic-tokens"; }
  // x [B, block] token ids, y [B, block] the token after each, both as floats.
  void get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                 tensor::Tensor& y) const override;

  // Nats per token of the chain: the loss of a model that knows it.
  static double entropy();
  int token(int64_t position) const { return stream_.at(static_cast<std::size_t>(position)); }

 private:
  int64_t n_, block_, vocab_;
  std::vector<int> stream_;  // n * block + 1 tokens
};

}  // namespace mddp::data

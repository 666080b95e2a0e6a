// The small transformer setting of Lab 11 (tied_weight): a GPT whose LM
// head is its token embedding (core/nn/gpt.h; vocabulary 11, sequences of 5
// tokens, one block of 2 heads, width 8), kSequencesPerRank sequences per
// rank of a fixed token batch, and the one-process reference it is checked
// against: the same model's gradient on the whole batch (the loss is the
// mean over equal shards' tokens, so the mean of the ranks' gradients is
// the whole batch's).
#pragma once

#include <memory>

#include "core/nn/gpt.h"
#include "labs/support/dp_fixture.h"

namespace mddp::labs {

inline constexpr int64_t kSequencesPerRank = 2;

std::unique_ptr<nn::Gpt> tied_gpt();
// Forward and backward of `model` (gradients accumulate) on rank r's shard
// of the world-sized batch.
void gpt_backward_shard(nn::Gpt& model, int rank, int world);
// A fresh model's gradients after backward on the whole batch, and on rank
// r's shard alone (unsynchronised).
Grads gpt_whole_batch_grads(int world);
Grads gpt_shard_grads(int rank, int world);

}  // namespace mddp::labs

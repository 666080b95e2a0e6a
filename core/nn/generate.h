// Text from a trained GPT, one token at a time (what `microddp sample` and
// the dashboard's sample at each evaluation run): the model reads the
// context, the last position's logits give the next token, which joins the
// context, and so on. The context is cropped to the model's block (its
// position embeddings stop there), so a long generation slides a window of
// the last `block` tokens. There is no key/value cache: each token is a
// full forward over the window, which at the sizes this project trains
// (block 64, 4 layers of 128) costs milliseconds on a CPU.
//
// Choosing a token from the logits l (nanoGPT's sample.py):
//   temperature 0, or top_k 1   the argmax (greedy; ties: the lowest id)
//   otherwise                   softmax(l / temperature) over the top_k
//                               largest logits (top_k 0: all of them),
//                               drawn with the caller's mddp::Rng
// so a seed gives the same text on every machine, and a temperature below 1
// sharpens the distribution towards the argmax.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/common/rng.h"
#include "core/nn/gpt.h"

namespace mddp::nn {

struct SamplingOptions {
  float temperature = 1.0f;  // >= 0; 0: greedy
  int64_t top_k = 0;         // >= 0; 0: no filter, 1: greedy
};

// The next token for one row of logits, as the table above says. Draws one
// number from `rng` unless the choice is greedy.
int64_t sample_token(std::span<const float> logits, const SamplingOptions& o, Rng& rng);

// `tokens` new token ids after `context` (at least one id), each chosen by
// sample_token from the model's logits at the last position of the last
// model.config().block ids. Switches dropout off (evaluation mode) and
// leaves it off. Runs on the model's device.
std::vector<int64_t> generate(Gpt& model, std::vector<int64_t> context, int64_t tokens,
                              const SamplingOptions& o, Rng& rng);

}  // namespace mddp::nn

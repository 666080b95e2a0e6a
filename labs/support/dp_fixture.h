// The small data-parallel setting the DP Labs' checks share: a FullMLP with
// odd sizes (5 inputs, two hidden layers of 7, 3 classes: 6 parameters), a
// fixed batch of kSamplesPerRank samples per rank, and the one-process
// reference it is checked against — the same model's gradient on the whole
// batch (the mean of equal shards' mean gradients is the whole batch's).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/nn/sequential.h"
#include "labs/support/ranks.h"

namespace mddp::labs {

using Grads = std::vector<std::vector<float>>;  // one vector per parameter, registration order

inline constexpr int64_t kSamplesPerRank = 3;

std::unique_ptr<nn::Sequential> dp_model(uint64_t seed = 42);
// The model's gradients (or parameter values) in registration order.
Grads grads_of(nn::Module& model);
Grads values_of(nn::Module& model);

// Forward and backward of `model` (gradients accumulate: no zero_grad) on
// rows [first, first + rows) of the fixed batch `batch` (a seed: micro-batch
// k of an accumulation is its own batch).
void backward_on(nn::Sequential& model, int64_t first, int64_t rows, int64_t total,
                 uint64_t batch = 0);
// Rank r's shard of a world-sized batch, then backward.
void backward_shard(nn::Sequential& model, int rank, int world, uint64_t batch = 0);
// The reference: a fresh model (values `start`, default: seed 42) after
// backward on the whole batches `batches` (accumulated) ...
Grads whole_batch_grads(int world, const std::vector<uint64_t>& batches = {0},
                        const Grads* start = nullptr);
// ... and what rank `rank`'s shards of them alone give (unsynchronised).
Grads shard_grads(int rank, int world, const std::vector<uint64_t>& batches = {0},
                  const Grads* start = nullptr);

// The check of a synchronised gradient on one rank: `model`'s gradients
// against `want`; `local` (this rank's own, unsynchronised gradient) lets it
// say "never synchronised". The message names the rank, parameter, element,
// expected and got, and recognises a sum (n times too large), a double
// average (n times too small) and an untouched gradient.
// `who` names the replica in the message ("rank 2").
CaseResult compare_grads(nn::Module& model, const Grads& want, const Grads& local, int world,
                         const std::string& who);

// "parameter '3.weight'"
std::string param_name(nn::Module& model, std::size_t i);

}  // namespace mddp::labs

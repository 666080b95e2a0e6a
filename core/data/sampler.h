// The distributed sampler. See Note [Global batch].
//
// Note [Global batch]
// ~~~~~~~~~~~~~~~~~~~
// Words: N = dataset size, B = global batch (samples per optimiser step over
// all ranks), W = world size, b = B / W = local batch (samples per rank).
//
// Every epoch has its own permutation perm of [0, N), drawn from (seed, epoch)
// (the identity when shuffling is off). Step s of the epoch uses the global
// batch perm[s·B, (s+1)·B), and rank r takes the contiguous slice
// [r·b, (r+1)·b) of it. So:
//  * the ranks' slices at a step are disjoint and, concatenated in rank order,
//    are exactly the batch a single process (W = 1, same seed) uses at that step;
//  * averaging the ranks' mean gradients therefore gives the single process's
//    mean gradient on the whole batch — the invariant DDP must preserve, and
//    what the equivalence tests check;
//  * steps_per_epoch = floor(N / B): the last partial batch is dropped, so every
//    step has exactly B samples on every world size (a short last batch would
//    split unevenly over the ranks and break the equality above).
// B must be divisible by W and at most N; anything else is rejected up front.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mddp::data {

class GlobalBatchSampler {
 public:
  // Throws InputError when global_batch is not in [1, dataset_size] or not
  // divisible by world_size. rank must be in [0, world_size).
  GlobalBatchSampler(int64_t dataset_size, int64_t global_batch, int rank, int world_size,
                     uint64_t seed, bool shuffle = true);

  int64_t dataset_size() const { return n_; }
  int64_t global_batch() const { return global_batch_; }
  int64_t local_batch() const { return global_batch_ / world_size_; }
  int64_t steps_per_epoch() const { return n_ / global_batch_; }
  // Samples one epoch visits: N - N % B (the remainder is dropped).
  int64_t samples_per_epoch() const { return steps_per_epoch() * global_batch_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // This rank's local_batch() sample indices for `step` (in [0, steps_per_epoch()))
  // of `epoch` (>= 0). The span points into a cached permutation and stays
  // valid until the next call for a different epoch. Not thread-safe.
  std::span<const int64_t> indices(int64_t epoch, int64_t step);

  // The whole permutation of [0, N) used in `epoch` (same validity as indices()).
  std::span<const int64_t> permutation(int64_t epoch);

 private:
  int64_t n_, global_batch_;
  int rank_, world_size_;
  uint64_t seed_;
  bool shuffle_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> perm_;
};

}  // namespace mddp::data

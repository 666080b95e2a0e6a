// The distributed sampler. See Note [Global batch].
//
// Note [Global batch]
// ~~~~~~~~~~~~~~~~~~~
// Words: N = dataset size, B = global batch (samples per optimiser step over
// all ranks), W = world size.
//
// Every epoch has its own permutation perm of [0, N), drawn from (seed, epoch)
// (the identity when shuffling is off). Step s of the epoch uses the global
// batch perm[s·B, s·B + R), R = B samples (fewer only at a kept last step,
// below), and the R samples are shared out in rank order as evenly as they go:
// contiguous slices, the first R mod W ranks one sample more (even_share). So:
//  * the ranks' slices at a step are disjoint and, concatenated in rank order,
//    are exactly the batch a single process (W = 1, same seed) uses at that step;
//  * a rank's gradient weighted by its share of the samples (Note [Uneven
//    shares] in core/train/trainer.cc) and averaged over the ranks is
//    therefore the single process's mean gradient on the whole batch — the
//    invariant DDP must preserve, and what the equivalence tests check. When
//    W divides R every weight is exactly 1;
//  * the last N mod B samples of an epoch are dropped by default, so every
//    step has B samples; with keep_last (--last-batch keep) they form one
//    shorter last step, and every sample is seen exactly once per epoch. A
//    rank whose slice is empty there (R < W) still takes part in the step,
//    with a contribution of zero, so no collective waits for it.
// B must be in [1, N]; it need not divide by W.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mddp::data {

// The half-open range [begin, end) of part `part` when `total` items are split
// into `parts` contiguous runs as evenly as they go: the first total % parts
// runs have one item more. Empty when total < parts and part >= total.
struct Share {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Share even_share(int64_t total, int64_t parts, int64_t part);

class GlobalBatchSampler {
 public:
  // Throws InputError when global_batch is not in [1, dataset_size]. rank
  // must be in [0, world_size).
  GlobalBatchSampler(int64_t dataset_size, int64_t global_batch, int rank, int world_size,
                     uint64_t seed, bool shuffle = true, bool keep_last = false);

  int64_t dataset_size() const { return n_; }
  int64_t global_batch() const { return global_batch_; }
  // The most samples a rank gets at one step: ceil(B / W).
  int64_t max_local_batch() const { return (global_batch_ + world_size_ - 1) / world_size_; }
  // floor(N / B), plus one shorter step with keep_last when B does not divide N.
  int64_t steps_per_epoch() const;
  // Samples one epoch visits: all N with keep_last, else N - N % B.
  int64_t samples_per_epoch() const;
  // Samples over all ranks at `step` of an epoch: B, or N % B at a kept last step.
  int64_t batch_at(int64_t step) const;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // This rank's sample indices for `step` (in [0, steps_per_epoch())) of
  // `epoch` (>= 0): its even_share of the step's batch_at(step) samples,
  // possibly empty at a kept last step. The span points into a cached
  // permutation and stays valid until the next call for a different epoch.
  // Not thread-safe.
  std::span<const int64_t> indices(int64_t epoch, int64_t step);
  // One sample of the step's batch (its first) for a rank or micro-batch with
  // none to run on with a weight of zero (same validity as indices()).
  std::span<const int64_t> stand_in(int64_t epoch, int64_t step);

  // The whole permutation of [0, N) used in `epoch` (same validity as indices()).
  std::span<const int64_t> permutation(int64_t epoch);

 private:
  int64_t n_, global_batch_;
  int rank_, world_size_;
  uint64_t seed_;
  bool shuffle_, keep_last_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> perm_;
};

}  // namespace mddp::data

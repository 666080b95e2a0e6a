#include "core/data/sampler.h"

#include <numeric>
#include <utility>

#include "core/common/check.h"
#include "core/common/rng.h"
#include "core/data/seeds.h"

namespace mddp::data {

GlobalBatchSampler::GlobalBatchSampler(int64_t dataset_size, int64_t global_batch, int rank,
                                       int world_size, uint64_t seed, bool shuffle)
    : n_(dataset_size),
      global_batch_(global_batch),
      rank_(rank),
      world_size_(world_size),
      seed_(seed),
      shuffle_(shuffle) {
  MDDP_CHECK(world_size > 0 && rank >= 0 && rank < world_size, "rank ", rank, " of world size ",
             world_size);
  if (dataset_size <= 0)
    throw InputError(str("the dataset is empty (", dataset_size, " samples); nothing to train on"));
  if (global_batch <= 0) throw InputError(str("--batch ", global_batch, " must be > 0"));
  if (global_batch > dataset_size)
    throw InputError(str("--batch ", global_batch, " is larger than the dataset (", dataset_size,
                         " samples); use --batch ", dataset_size, " or less"));
  if (global_batch % world_size != 0)
    throw InputError(str("--batch ", global_batch, " is not divisible by ", world_size,
                         " ranks; the global batch is split evenly, so pick a multiple of ",
                         world_size));
}

std::span<const int64_t> GlobalBatchSampler::permutation(int64_t epoch) {
  MDDP_CHECK(epoch >= 0, "epoch ", epoch);
  if (epoch != cached_epoch_) {
    perm_.resize(static_cast<std::size_t>(n_));
    std::iota(perm_.begin(), perm_.end(), int64_t{0});
    if (shuffle_) {
      // Fisher-Yates driven by mddp::Rng: the same (seed, epoch) gives the same
      // order on every rank and machine, which the global-batch split relies on.
      Rng rng(derive_seed(seed_, static_cast<uint64_t>(epoch)));
      for (int64_t i = n_ - 1; i > 0; --i) {
        const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
        std::swap(perm_[i], perm_[j]);
      }
    }
    cached_epoch_ = epoch;
  }
  return perm_;
}

std::span<const int64_t> GlobalBatchSampler::indices(int64_t epoch, int64_t step) {
  MDDP_CHECK(step >= 0 && step < steps_per_epoch(), "step ", step, " of ", steps_per_epoch(),
             " per epoch");
  const std::span<const int64_t> perm = permutation(epoch);
  const int64_t local = local_batch();
  return perm.subspan(static_cast<std::size_t>(step * global_batch_ + rank_ * local),
                      static_cast<std::size_t>(local));
}

}  // namespace mddp::data

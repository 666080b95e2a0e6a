#include "core/data/sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/common/check.h"
#include "core/common/rng.h"
#include "core/data/seeds.h"

namespace mddp::data {

Share even_share(int64_t total, int64_t parts, int64_t part) {
  MDDP_CHECK(total >= 0 && parts > 0 && part >= 0 && part < parts, "part ", part, " of ", parts,
             " of ", total);
  const int64_t base = total / parts, extra = total % parts;
  const int64_t begin = part * base + std::min(part, extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

GlobalBatchSampler::GlobalBatchSampler(int64_t dataset_size, int64_t global_batch, int rank,
                                       int world_size, uint64_t seed, bool shuffle, bool keep_last)
    : n_(dataset_size),
      global_batch_(global_batch),
      rank_(rank),
      world_size_(world_size),
      seed_(seed),
      shuffle_(shuffle),
      keep_last_(keep_last) {
  MDDP_CHECK(world_size > 0 && rank >= 0 && rank < world_size, "rank ", rank, " of world size ",
             world_size);
  if (dataset_size <= 0)
    throw InputError(str("the dataset is empty (", dataset_size, " samples); nothing to train on"));
  if (global_batch <= 0) throw InputError(str("--batch ", global_batch, " must be > 0"));
  if (global_batch > dataset_size)
    throw InputError(str("--batch ", global_batch, " is larger than the dataset (", dataset_size,
                         " samples); use --batch ", dataset_size, " or less"));
}

int64_t GlobalBatchSampler::steps_per_epoch() const {
  const bool short_step = keep_last_ && n_ % global_batch_ != 0;
  return n_ / global_batch_ + (short_step ? 1 : 0);
}

int64_t GlobalBatchSampler::samples_per_epoch() const {
  return keep_last_ ? n_ : n_ - n_ % global_batch_;
}

int64_t GlobalBatchSampler::batch_at(int64_t step) const {
  MDDP_CHECK(step >= 0 && step < steps_per_epoch(), "step ", step, " of ", steps_per_epoch(),
             " per epoch");
  return std::min(global_batch_, n_ - step * global_batch_);
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
  const Share mine = even_share(batch_at(step), world_size_, rank_);
  return permutation(epoch).subspan(static_cast<std::size_t>(step * global_batch_ + mine.begin),
                                    static_cast<std::size_t>(mine.size()));
}

std::span<const int64_t> GlobalBatchSampler::stand_in(int64_t epoch, int64_t step) {
  batch_at(step);  // checks the step
  return permutation(epoch).subspan(static_cast<std::size_t>(step * global_batch_), 1);
}

}  // namespace mddp::data

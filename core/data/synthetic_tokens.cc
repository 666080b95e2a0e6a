#include "core/data/synthetic_tokens.h"

#include <array>
#include <cmath>

#include "core/common/check.h"
#include "core/common/memory.h"
#include "core/common/rng.h"
#include "core/data/batch_fill.h"
#include "core/data/seeds.h"

namespace mddp::data {
namespace {

constexpr uint64_t kChainStream = 0x636861696e212121ULL;    // "chain!!!"
constexpr uint64_t kTokenStream = 0x746f6b656e732121ULL;    // "tokens!!"
constexpr std::array<float, 3> kOdds = {0.7f, 0.2f, 0.1f};  // of each token's three successors

// Three distinct successors per token, drawn uniformly.
std::vector<std::array<int, 3>> make_chain(int64_t vocab, Rng& rng) {
  std::vector<std::array<int, 3>> next(static_cast<std::size_t>(vocab));
  for (auto& s : next)
    for (std::size_t k = 0; k < s.size(); ++k) {
      bool fresh = false;
      while (!fresh) {
        s[k] = static_cast<int>(rng.below(static_cast<uint64_t>(vocab)));
        fresh = true;
        for (std::size_t j = 0; j < k; ++j) fresh &= s[j] != s[k];
      }
    }
  return next;
}

}  // namespace

SyntheticTokens::SyntheticTokens(int64_t n, int64_t block, int64_t vocab, uint64_t seed,
                                 uint64_t chain_seed)
    : n_(n), block_(block), vocab_(vocab) {
  if (n <= 0 || block <= 0)
    throw InputError(str("synthetic-tokens: needs samples and --block > 0 (got ", n, " samples of ",
                         block, " tokens)"));
  if (vocab < 3 || vocab > (int64_t{1} << 24))
    throw InputError(
        str("synthetic-tokens: the vocabulary (--classes) must be in [3, 2^24], got ", vocab));
  if (block > (int64_t{1} << 32) / n)
    throw InputError(str("synthetic-tokens: ", n, " samples of ", block, " tokens is too large"));
  require_memory(4.0 * static_cast<double>(n * block),
                 str("synthetic-tokens: ", n * block, " tokens"));
  Rng chain_rng(derive_seed(chain_seed, kChainStream));
  const auto next = make_chain(vocab, chain_rng);
  Rng rng(derive_seed(seed, kTokenStream));
  stream_.resize(static_cast<std::size_t>(n * block + 1));
  stream_[0] = static_cast<int>(rng.below(static_cast<uint64_t>(vocab)));
  for (std::size_t i = 1; i < stream_.size(); ++i) {
    const float u = rng.uniform();
    const int k = u < kOdds[0] ? 0 : u < kOdds[0] + kOdds[1] ? 1 : 2;
    stream_[i] = next[static_cast<std::size_t>(stream_[i - 1])][k];
  }
}

double SyntheticTokens::entropy() {
  double h = 0;
  for (float p : kOdds) h -= p * std::log(static_cast<double>(p));
  return h;
}

void SyntheticTokens::get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                                tensor::Tensor& y) const {
  const auto batch = static_cast<int64_t>(indices.size());
  // Targets are the inputs shifted by one token: the same copy, one later.
  const auto fill = [&](std::span<float> out, int64_t shift) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t i = indices[b];
      MDDP_CHECK(i >= 0 && i < n_, "sample index ", i, " out of range [0, ", n_, ")");
      const int* src = stream_.data() + i * block_ + shift;
      for (int64_t t = 0; t < block_; ++t) out[b * block_ + t] = static_cast<float>(src[t]);
    }
  };
  detail::fill_host(x, batch * block_, "x", [&](std::span<float> out) { fill(out, 0); });
  detail::fill_host(y, batch * block_, "y", [&](std::span<float> out) { fill(out, 1); });
}

}  // namespace mddp::data

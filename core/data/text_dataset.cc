#include "core/data/text_dataset.h"

#include "core/common/check.h"
#include "core/data/batch_fill.h"
#include "core/data/text_files.h"

namespace mddp::data {
namespace {

int64_t checked_block(int64_t block) {
  if (block < 1) throw InputError(str("--block ", block, " must be at least 1"));
  return block;
}

// `split`'s part of the corpus's ids (Note [Text windows]); InputError when
// it is too short to hold one window of block + 1 tokens.
std::vector<TokenId> split_tokens(const std::vector<TokenId>& all, Split split, int64_t block,
                                  const std::string& what) {
  const auto n = static_cast<int64_t>(all.size());
  const int64_t cut = train_token_count(n);
  const int64_t begin = split == Split::kTrain ? 0 : cut;
  const int64_t end = split == Split::kTrain ? cut : n;
  if (end - begin < block + 1)
    throw InputError(str(what, ": the ", split == Split::kTrain ? "train" : "validation",
                         " split has ", end - begin, " tokens (the ",
                         split == Split::kTrain ? "first 90%" : "last 10%", " of ", n,
                         "); --block ", block, " needs ", block + 1,
                         " in each split, so a corpus of at least ", 10 * block + 1, " tokens"));
  return {all.begin() + begin, all.begin() + end};
}

}  // namespace

TextDataset::TextDataset(const std::string& path, Split split, int64_t block)
    : TextDataset(read_corpus(path), split, checked_block(block), path) {}

TextDataset::TextDataset(std::u32string_view corpus, Split split, int64_t block,
                         const std::string& what)
    : name_(str("text:", what, "/", split_name(split))),
      block_(checked_block(block)),
      tokenizer_(CharTokenizer::of_text(corpus, what)) {
  tokens_ = split_tokens(tokenizer_.encode(corpus), split, block_, what);
}

void TextDataset::get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                            tensor::Tensor& y) const {
  const auto batch = static_cast<int64_t>(indices.size());
  for (int64_t i : indices)
    MDDP_CHECK(i >= 0 && i < size(), "sample index ", i, " out of range [0, ", size(), ")");
  // y is x shifted by one token: the window of block + 1 tokens at i, split in two.
  const auto fill = [&](tensor::Tensor& t, int64_t shift, const char* what) {
    detail::fill_host(t, batch * block_, what, [&](std::span<float> out) {
      for (int64_t b = 0; b < batch; ++b) {
        const TokenId* src = tokens_.data() + indices[b] + shift;
        float* dst = out.data() + b * block_;
        for (int64_t k = 0; k < block_; ++k) dst[k] = static_cast<float>(src[k]);
      }
    });
  };
  fill(x, 0, "x");
  fill(y, 1, "y");
}

}  // namespace mddp::data

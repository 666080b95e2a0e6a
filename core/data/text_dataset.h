// `--dataset text:PATH`: a character-level language-modelling dataset.
//
// Note [Text windows]
// ~~~~~~~~~~~~~~~~~~~
// The corpus (text_files.h) becomes N token ids (char_tokenizer.h; the
// vocabulary is the whole corpus's, so both splits share the ids). It is
// split by position: the train split is the first floor(0.9·N) tokens, the
// validation split (Split::kTest) the rest, so no window crosses from one
// into the other. Sample i of a split of n tokens is the window of block + 1
// tokens starting at its token i:
//
//   x = tokens[i, i + block)        y = tokens[i + 1, i + block + 1)
//
// y[t] is the token after x[t]: every position of a window is a next-token
// prediction. A split has n - block samples (every start whose window
// fits), so the GlobalBatchSampler (sampler.h) draws random windows as it
// draws any samples: disjoint across ranks within a step, the same for a
// seed on every world size. Windows overlap: an epoch starts one window at
// every token, and reads each token about block times.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/data/char_tokenizer.h"
#include "core/data/dataset.h"
#include "core/data/split.h"

namespace mddp::data {

// Tokens of the train split of a corpus of n tokens: the first 90%.
inline int64_t train_token_count(int64_t n) {
  return n * 9 / 10;
}

class TextDataset final : public Dataset {
 public:
  // Reads the corpus at `path` (Note [Which files] in text_files.h) and keeps
  // `split`'s tokens. Throws InputError for a file that is missing or not
  // text, block < 1, too large a vocabulary, or a split shorter than block + 1.
  TextDataset(const std::string& path, Split split, int64_t block);
  // The same from a corpus in memory; `what` names it in errors and in name().
  TextDataset(std::u32string_view corpus, Split split, int64_t block, const std::string& what);

  int64_t size() const override { return static_cast<int64_t>(tokens_.size()) - block_; }
  tensor::Shape sample_shape() const override { return {block_}; }
  int64_t target_dim() const override { return 0; }
  int64_t targets_per_sample() const override { return block_; }
  int64_t num_classes() const override { return tokenizer_.size(); }
  std::string name() const override { return name_; }
  // x holds token ids as they are: raw "token_id", scale 1, mean 0, std 1.
  InputEncoding input_encoding() const override { return {"token_id", 1, 0, 1}; }
  std::string vocabulary() const override { return tokenizer_.vocabulary(); }
  // x [B, block] and y [B, block], token ids as floats (exact below 2^24).
  void get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                 tensor::Tensor& y) const override;

  const CharTokenizer& tokenizer() const { return tokenizer_; }
  std::span<const TokenId> tokens() const { return tokens_; }  // this split's

 private:
  std::string name_;
  int64_t block_;
  CharTokenizer tokenizer_;
  std::vector<TokenId> tokens_;
};

}  // namespace mddp::data

// A character-level tokenizer: the vocabulary is the sorted set of Unicode
// code points of a corpus, and a character's token id is its index in that
// set. So the ids follow from the text alone (no training, no file to ship),
// and the vocabulary written as a string of its characters in id order
// rebuilds the tokenizer exactly (what a checkpoint records).
//
// Ids are stored as uint16_t: half the memory of int32_t for the corpus a
// dataset keeps and reads per batch, and room enough for any character
// vocabulary (English text has ~100 characters, a Chinese corpus a few
// thousand). The model sees ids as floats, exact to 2^24, far above 2^16.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mddp::data {

using TokenId = uint16_t;
inline constexpr int64_t kMaxVocabulary = int64_t{1} << 16;  // the ids uint16_t can hold
static_assert(kMaxVocabulary <= (int64_t{1} << 24), "ids travel as floats, exact to 2^24");

class CharTokenizer {
 public:
  // The vocabulary of `text`. Throws InputError naming `what` when it has
  // more than kMaxVocabulary characters, or when `text` is empty.
  static CharTokenizer of_text(std::u32string_view text, const std::string& what);
  // The tokenizer whose vocabulary() is `vocabulary` (UTF-8, characters in
  // id order); InputError when it is not valid UTF-8, empty, not sorted,
  // repeats a character or is too large.
  static CharTokenizer from_vocabulary(std::string_view vocabulary);

  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  // The characters in id order, as UTF-8.
  std::string vocabulary() const;
  char32_t character(int64_t id) const { return chars_.at(static_cast<std::size_t>(id)); }

  // The ids of `text`; InputError for a character not in the vocabulary.
  std::vector<TokenId> encode(std::u32string_view text) const;
  // The UTF-8 text of `ids`; InputError for an id outside [0, size()).
  std::string decode(std::span<const int64_t> ids) const;

 private:
  explicit CharTokenizer(std::u32string sorted_chars) : chars_(std::move(sorted_chars)) {}
  std::u32string chars_;  // sorted, distinct: chars_[id] is the character of id
};

}  // namespace mddp::data

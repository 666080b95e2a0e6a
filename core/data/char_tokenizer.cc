#include "core/data/char_tokenizer.h"

#include <algorithm>

#include "core/common/check.h"
#include "core/data/utf8.h"

namespace mddp::data {
namespace {

void check_vocabulary_size(std::size_t n, const std::string& what) {
  if (n == 0) throw InputError(str(what, ": no characters, so no vocabulary"));
  if (static_cast<int64_t>(n) > kMaxVocabulary)
    throw InputError(str(what, ": a vocabulary of ", n, " distinct characters; at most ",
                         kMaxVocabulary, " fit the 16-bit token ids"));
}

}  // namespace

CharTokenizer CharTokenizer::of_text(std::u32string_view text, const std::string& what) {
  // One bit per code point marks the characters seen: linear in the text,
  // where sorting a copy of a few million characters would take a while.
  std::vector<bool> seen(0x110000);
  for (char32_t c : text) {
    MDDP_CHECK(c < 0x110000, "not a code point: ", static_cast<uint32_t>(c));
    seen[c] = true;
  }
  std::u32string chars;
  for (char32_t c = 0; c < 0x110000; ++c)
    if (seen[c]) chars.push_back(c);
  check_vocabulary_size(chars.size(), what);
  return CharTokenizer(std::move(chars));
}

CharTokenizer CharTokenizer::from_vocabulary(std::string_view vocabulary) {
  std::u32string chars = decode_utf8(vocabulary, "the vocabulary");
  check_vocabulary_size(chars.size(), "the vocabulary");
  for (std::size_t i = 1; i < chars.size(); ++i)
    if (chars[i - 1] >= chars[i])
      throw InputError(
          str("the vocabulary is not a sorted set of distinct characters (at id ", i, ")"));
  return CharTokenizer(std::move(chars));
}

std::string CharTokenizer::vocabulary() const {
  return encode_utf8(chars_);
}

std::vector<TokenId> CharTokenizer::encode(std::u32string_view text) const {
  std::vector<TokenId> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto it = std::lower_bound(chars_.begin(), chars_.end(), text[i]);
    if (it == chars_.end() || *it != text[i])
      throw InputError(
          str("character ", char_name(text[i]), " at position ", i, " is not in the vocabulary"));
    ids[i] = static_cast<TokenId>(it - chars_.begin());
  }
  return ids;
}

std::string CharTokenizer::decode(std::span<const int64_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= size())
      throw InputError(
          str("token id ", id, " is not in the vocabulary of ", size(), " characters"));
    append_utf8(out, chars_[static_cast<std::size_t>(id)]);
  }
  return out;
}

}  // namespace mddp::data

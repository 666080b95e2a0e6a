#include "core/data/utf8.h"

#include <cstdio>

#include "core/common/check.h"

namespace mddp::data {
namespace {

// What a lead byte says: the sequence's length (0: not a lead byte), the
// smallest code point that length may carry (less is an overlong form) and
// the lead byte's payload bits.
struct Utf8Lead {
  int length;
  char32_t min;
  char32_t bits;
};

Utf8Lead utf8_lead(uint8_t b) {
  if (b < 0x80) return {1, 0, b};
  if ((b & 0xE0) == 0xC0) return {2, 0x80, b & 0x1Fu};
  if ((b & 0xF0) == 0xE0) return {3, 0x800, b & 0x0Fu};
  if ((b & 0xF8) == 0xF0) return {4, 0x10000, b & 0x07u};
  return {0, 0, 0};
}

std::string hex_text(const char* format, unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::u32string decode_utf8(std::string_view bytes, const std::string& what) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto fail = [&](std::size_t at, const std::string& why) {
    throw InputError(str(what, ": not valid UTF-8 at byte offset ", at, " (", why, ")"));
  };
  const std::size_t n = bytes.size();
  for (std::size_t i = 0; i < n;) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    const Utf8Lead lead = utf8_lead(b);
    if (lead.length == 0)
      fail(i, b < 0xC0 ? str("continuation byte ", hex_text("0x%02X", b), " starts a character")
                       : str("byte ", hex_text("0x%02X", b), " never occurs in UTF-8"));
    if (i + static_cast<std::size_t>(lead.length) > n)
      fail(i, str("the text ends inside a ", lead.length, "-byte sequence"));
    char32_t c = lead.bits;
    for (int k = 1; k < lead.length; ++k) {
      const auto next = static_cast<uint8_t>(bytes[i + static_cast<std::size_t>(k)]);
      if ((next & 0xC0) != 0x80)
        fail(i, str("byte ", hex_text("0x%02X", next), " at offset ", i + k,
                    " does not continue a ", lead.length, "-byte sequence"));
      c = (c << 6) | (next & 0x3Fu);
    }
    if (c < lead.min) fail(i, str("an overlong encoding of ", hex_text("U+%04X", c)));
    if (c >= 0xD800 && c <= 0xDFFF) fail(i, str("the surrogate ", hex_text("U+%04X", c)));
    if (c > 0x10FFFF) fail(i, str(hex_text("U+%X", c), " is beyond U+10FFFF"));
    out.push_back(c);
    i += static_cast<std::size_t>(lead.length);
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  MDDP_CHECK(c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF),
             "not a Unicode scalar value: ", static_cast<uint32_t>(c));
  const auto byte = [&](char32_t v) { out.push_back(static_cast<char>(v)); };
  if (c < 0x80) {
    byte(c);
  } else if (c < 0x800) {
    byte(0xC0 | (c >> 6));
    byte(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    byte(0xE0 | (c >> 12));
    byte(0x80 | ((c >> 6) & 0x3F));
    byte(0x80 | (c & 0x3F));
  } else {
    byte(0xF0 | (c >> 18));
    byte(0x80 | ((c >> 12) & 0x3F));
    byte(0x80 | ((c >> 6) & 0x3F));
    byte(0x80 | (c & 0x3F));
  }
}

std::string char_name(char32_t c) {
  const std::string code = hex_text("U+%04X", c);
  if (c <= 0x20 || (c >= 0x7F && c <= 0xA0)) return code;
  std::string quoted = "'";
  append_utf8(quoted, c);
  return quoted + "' (" + code + ")";
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

}  // namespace mddp::data

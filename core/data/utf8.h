// UTF-8, strictly: the text dataset decodes its files with it and a sample's
// tokens are encoded back with it. Strict means what RFC 3629 allows and
// nothing else: no overlong forms, no surrogates (U+D800..U+DFFF), nothing
// above U+10FFFF, no stray or missing continuation bytes. A lenient decoder
// would turn such bytes into U+FFFD and train on characters the file never held.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mddp::data {

// The code points of `bytes`. Throws InputError "WHAT: not valid UTF-8 at
// byte offset N (why)", N being the offset of the offending sequence's first byte.
std::u32string decode_utf8(std::string_view bytes, const std::string& what);

// Appends the UTF-8 bytes of code point `c` (a Unicode scalar value) to `out`.
void append_utf8(std::string& out, char32_t c);

// The UTF-8 bytes of `text`.
std::string encode_utf8(std::u32string_view text);

// A character as an error message names it: 'a' (U+0061), or U+000A alone
// for a space or a control character, which would print as nothing.
std::string char_name(char32_t c);

}  // namespace mddp::data

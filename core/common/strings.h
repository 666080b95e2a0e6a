// Lists said in one line: join({"a", "b", "c"}, ", ") is "a, b, c". Every
// message that names several ranks, hosts or choices builds its list here.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace mddp {

// The items of `range`, each written as `show(item)` would stream it,
// with `sep` between them; "" for an empty range.
template <typename Range, typename Show>
std::string join(const Range& range, std::string_view sep, Show show) {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : range) {
    if (!first) out << sep;
    out << show(item);
    first = false;
  }
  return out.str();
}

// The items themselves (strings, numbers: whatever streams).
template <typename Range>
std::string join(const Range& range, std::string_view sep) {
  return join(
      range, sep, [](const auto& item) -> const auto& { return item; });
}

}  // namespace mddp

#include "control/fingerprint.h"

#include <algorithm>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::control {
namespace {

template <typename T>
std::string list(const std::vector<T>& v) {
  return str("[", join(v, ", "), "]");
}

// The neighbourhood of the first character where a and b differ, quoted.
std::string first_difference(const std::string& a, const std::string& b, const std::string& there) {
  constexpr std::size_t kContext = 24;
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const std::size_t from =
      i > kContext + 8 ? i - kContext : 0;  // no "..." to save a few characters
  auto excerpt = [&](const std::string& s) {
    std::string e = s.substr(std::min(from, s.size()), 2 * kContext);
    return std::string(from > 0 ? "'..." : "'") + e +
           (from + 2 * kContext < s.size() ? "...'" : "'");
  };
  return str(excerpt(a), " here vs ", excerpt(b), " on ", there, " (first difference at character ",
             i, ")");
}

}  // namespace

std::string fingerprint_diff(const Fingerprint& mine, const Fingerprint& theirs,
                             const std::string& there, std::size_t max_items) {
  std::vector<std::string> items;
  if (mine.version != theirs.version)
    items.push_back(
        str("microddp version ", mine.version, " here vs ", theirs.version, " on ", there));
  if (mine.dtype != theirs.dtype)
    items.push_back(str("gradient wire type ", mine.dtype, " here vs ", theirs.dtype, " on ", there,
                        " (--compress)"));
  if (mine.model != theirs.model)
    items.push_back("model " + first_difference(mine.model, theirs.model, there));
  if (mine.parameters.size() != theirs.parameters.size())
    items.push_back(str(mine.parameters.size(), " parameters here vs ", theirs.parameters.size(),
                        " on ", there));
  for (std::size_t i = 0; i < std::min(mine.parameters.size(), theirs.parameters.size()); ++i) {
    const auto& a = mine.parameters[i];
    const auto& b = theirs.parameters[i];
    if (a.name != b.name)
      items.push_back(str("parameter ", i, " is '", a.name, "' here vs '", b.name, "' on ", there));
    else if (a.shape != b.shape)
      items.push_back(str("parameter ", i, " '", a.name, "': shape ", list(a.shape), " here vs ",
                          list(b.shape), " on ", there));
  }
  if (mine.buckets.size() != theirs.buckets.size())
    items.push_back(str(mine.buckets.size(), " buckets here vs ", theirs.buckets.size(), " on ",
                        there, " (--bucket-mb, --first-bucket-mb)"));
  else
    for (std::size_t i = 0; i < mine.buckets.size(); ++i)
      if (mine.buckets[i] != theirs.buckets[i])
        items.push_back(str("bucket ", i, " holds parameters ", list(mine.buckets[i]), " here vs ",
                            list(theirs.buckets[i]), " on ", there));

  std::string out;
  for (std::size_t i = 0; i < std::min(items.size(), max_items); ++i)
    out += (i ? "; " : "") + items[i];
  if (items.size() > max_items) out += str("; (and ", items.size() - max_items, " more)");
  return out;
}

}  // namespace mddp::control

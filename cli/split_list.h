// "a,b,,c" -> {"a", "b", "c"}: the comma-separated lists of the flags
// (--world-sizes, --transports, --fit-netns, ...). Empty items are dropped.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace mddp::cli {

inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace mddp::cli

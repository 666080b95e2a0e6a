// Ranks grouped by what they hold, and which group is the job's: the
// largest, and on a tie the first (the one holding the lowest rank), since
// with two ranks nothing says which of them is the odd one. The
// coordinator's model check and the replica check name the ranks outside it.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp {

// `ranks`, grouped by same(a, b); groups in the order of their first rank.
template <class Same>
std::vector<std::vector<int>> group_ranks(const std::vector<int>& ranks, Same same) {
  std::vector<std::vector<int>> groups;
  for (int r : ranks) {
    const auto g = std::find_if(groups.begin(), groups.end(),
                                [&](const std::vector<int>& g) { return same(g.front(), r); });
    if (g == groups.end())
      groups.push_back({r});
    else
      g->push_back(r);
  }
  return groups;
}

// The job's group among `groups` (not empty): the largest, the first on a tie.
inline const std::vector<int>& largest_group(const std::vector<std::vector<int>>& groups) {
  return *std::max_element(groups.begin(), groups.end(),
                           [](const auto& a, const auto& b) { return a.size() < b.size(); });
}

// "rank 2" or "ranks 1, 3": how a message names ranks.
inline std::string ranks_phrase(const std::vector<int>& ranks) {
  return str(ranks.size() == 1 ? "rank " : "ranks ", join(ranks, ", "));
}

}  // namespace mddp

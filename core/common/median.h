// The median of a sample: the middle value, or the mean of the two middle
// values of an even count; 0 for an empty sample. What the benchmarks and
// the run analysis report as "the" time of a repeated measurement.
#pragma once

#include <algorithm>
#include <vector>

namespace mddp {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace mddp

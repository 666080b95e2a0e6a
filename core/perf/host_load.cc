#include "core/perf/host_load.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/common/check.h"

namespace mddp::perf {

std::vector<HostLoad> host_loads(const std::vector<RankPlacement>& ranks) {
  std::vector<RankPlacement> sorted = ranks;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  std::vector<HostLoad> out;
  std::map<std::string, std::size_t> index;  // host -> position in out
  for (const auto& r : sorted) {
    auto [it, fresh] = index.try_emplace(r.host, out.size());
    if (fresh) out.push_back(HostLoad{r.host, {}, {}, 0, 0});
    HostLoad& h = out[it->second];
    h.ranks.push_back(r.rank);
    h.rank_threads.push_back(std::max(0, r.threads));
    h.threads += std::max(1, r.threads);
    h.cpus = std::max(h.cpus, r.cpus);
  }
  return out;
}

std::string rank_list(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    out += str(out.empty() ? "" : ", ", v[i]);
    if (j > i) out += str(j == i + 1 ? ", " : "-", v[j]);
    i = j + 1;
  }
  return out;
}

std::string HostLoad::describe() const {
  const std::size_t n = ranks.size();
  std::string s = str("host ", host.empty() ? "?" : host, ": ", n, n == 1 ? " rank (" : " ranks (",
                      rank_list(ranks), ")");
  const bool all_known =
      std::none_of(rank_threads.begin(), rank_threads.end(), [](int t) { return t == 0; });
  const bool uniform = std::all_of(rank_threads.begin(), rank_threads.end(),
                                   [&](int t) { return t == rank_threads[0]; });
  if (all_known && uniform && n > 1)
    s += str(" x ", rank_threads[0],
             rank_threads[0] == 1 ? " compute thread = " : " compute threads = ", threads,
             " threads");
  else
    s += str(" with ", threads, threads == 1 ? " compute thread" : " compute threads",
             all_known ? "" : " (a rank that did not report its threads counts as 1)");
  s += cpus > 0 ? str(" on ", cpus, cpus == 1 ? " CPU" : " CPUs")
                : std::string(" on an unknown number of CPUs");
  if (oversubscribed()) s += str(", ", std::round(10.0 * threads / cpus) / 10, "x oversubscribed");
  return s;
}

}  // namespace mddp::perf

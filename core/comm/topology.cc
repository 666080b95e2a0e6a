#include "core/comm/topology.h"

#include <algorithm>
#include <map>

namespace mddp::comm {

HostTopology HostTopology::from_identities(const std::vector<std::string>& identities) {
  HostTopology t;
  const std::size_t n = identities.size();
  t.host_of_.resize(n);
  t.local_rank_.resize(n);
  std::map<std::string, int> index;  // identity -> host, numbered by first appearance (lowest rank)
  for (std::size_t r = 0; r < n; ++r) {
    const auto [it, fresh] = index.try_emplace(identities[r], static_cast<int>(t.hosts_.size()));
    if (fresh) t.hosts_.emplace_back();
    auto& ranks = t.hosts_[static_cast<std::size_t>(it->second)];
    t.host_of_[r] = it->second;
    t.local_rank_[r] = static_cast<int>(ranks.size());
    ranks.push_back(static_cast<int>(r));
  }
  return t;
}

bool HostTopology::multi_host_multi_rank() const {
  return host_count() > 1 && std::any_of(hosts_.begin(), hosts_.end(),
                                         [](const std::vector<int>& h) { return h.size() > 1; });
}

std::string HostTopology::describe() const {
  std::string split;
  for (const auto& h : hosts_) {
    if (!split.empty()) split += '+';
    split += std::to_string(h.size());
  }
  return str(host_count(), host_count() == 1 ? " host: " : " hosts: ", split, " ranks");
}

HostTopology exchange_topology(Store& store, int rank, int size, const std::string& identity,
                               Deadline deadline, const std::string& prefix) {
  store.set(str(prefix, "/host/", rank), identity);
  std::vector<std::string> identities(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      identities[static_cast<std::size_t>(r)] = identity;
      continue;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      identities[static_cast<std::size_t>(r)] =
          store.get(str(prefix, "/host/", r), std::max(left, std::chrono::milliseconds(0)));
    } catch (const TimeoutError& e) {
      throw TimeoutError(
          str("rank ", rank, ": rank ", r, " never joined the data plane (", e.what(), ")"));
    }
  }
  return HostTopology::from_identities(identities);
}

}  // namespace mddp::comm

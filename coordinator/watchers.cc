#include "coordinator/watchers.h"

#include <vector>

namespace mddp::coordinator {

void Watchers::add(uint64_t id, int attempt, int rank, Callback on_change) {
  std::lock_guard lock(mu_);
  watchers_.emplace(id, Watcher{attempt, rank, std::move(on_change)});
  ++open_[{attempt, rank}];
}

std::optional<std::pair<int, int>> Watchers::remove(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return std::nullopt;
  const std::pair<int, int> watched{it->second.attempt, it->second.rank};
  watchers_.erase(it);
  if (--open_[watched] > 0) return std::nullopt;  // another stream of this rank is open
  return watched;
}

bool Watchers::watching(int attempt, int rank) const {
  std::lock_guard lock(mu_);
  const auto it = open_.find({attempt, rank});
  return it != open_.end() && it->second > 0;
}

void Watchers::notify(int attempt, const control::JobStatus& status, bool finished) const {
  std::vector<Callback> callbacks;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, w] : watchers_)
      if (attempt < 0 || w.attempt == attempt) callbacks.push_back(w.on_change);
  }
  for (const auto& cb : callbacks) cb(status, finished);
}

}  // namespace mddp::coordinator

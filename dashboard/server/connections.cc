#include "dashboard/server/connections.h"

#include <algorithm>
#include <vector>

namespace mddp::dashboard {

bool Connections::make_room(const std::string& address) {
  if (from(address) >= kMaxPerAddress) {
    const auto v = victim(&address);
    if (!v) return false;
    evict(*v);
  }
  if (entries_.size() >= kMax) {
    // The address holding the most gives one up first.
    const auto biggest =
        std::max_element(per_address_.begin(), per_address_.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    auto v = victim(&biggest->first);
    if (!v) v = victim(nullptr);
    if (!v) return false;
    evict(*v);
  }
  return true;
}

uint64_t Connections::add(const std::string& address, State state, std::function<void()> close) {
  entries_.emplace(++last_id_, Entry{address, state, ++clock_, std::move(close)});
  ++per_address_[address];
  return last_id_;
}

void Connections::set_state(uint64_t id, State state) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.state == state) return;
  it->second.state = state;
  it->second.since = ++clock_;
}

void Connections::remove(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  auto count = per_address_.find(it->second.address);
  if (--count->second == 0) per_address_.erase(count);
  entries_.erase(it);
}

std::size_t Connections::from(const std::string& address) const {
  const auto it = per_address_.find(address);
  return it == per_address_.end() ? 0 : it->second;
}

std::optional<uint64_t> Connections::victim(const std::string* address) const {
  std::optional<uint64_t> idle, stream;
  auto older = [&](const std::optional<uint64_t>& best, const Entry& e) {
    return !best || e.since < entries_.at(*best).since;
  };
  for (const auto& [id, e] : entries_) {
    if (address && e.address != *address) continue;
    if (e.state == State::kIdle && older(idle, e)) idle = id;
    if (e.state == State::kStream && older(stream, e)) stream = id;
  }
  return idle ? idle : stream;
}

void Connections::evict(uint64_t id) {
  auto close = std::move(entries_.at(id).close);
  remove(id);  // forgotten now: the room is there before the socket is closed
  close();
}

void Connections::close_all() {
  std::vector<std::function<void()>> closers;  // a closer may remove itself
  for (auto& [id, e] : entries_) closers.push_back(e.close);
  for (auto& close : closers) close();
}

}  // namespace mddp::dashboard

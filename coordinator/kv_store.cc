#include "coordinator/kv_store.h"

#include <vector>

#include "core/common/check.h"

namespace mddp::coordinator {

Outcome KvStore::check_key(const std::string& key) const {
  if (key.empty()) return Outcome::error(Code::kInvalidArgument, "empty key");
  if (key.size() > limits_.max_key_bytes)
    return Outcome::error(Code::kInvalidArgument,
                          str("key of ", key.size(), " bytes (at most ", limits_.max_key_bytes,
                              "): '", key.substr(0, 40), "...'"));
  return Outcome::success();
}

Outcome KvStore::set(const std::string& key, std::string value) {
  if (auto o = check_key(key); !o.ok()) return o;
  if (value.size() > limits_.max_value_bytes)
    return Outcome::error(Code::kInvalidArgument,
                          str("value of key '", key, "' has ", value.size(), " bytes (at most ",
                              limits_.max_value_bytes, ")"));
  std::vector<GetCallback> fire;
  {
    std::lock_guard lock(mu_);
    if (aborted_) return Outcome::error(Code::kAborted, *aborted_);
    auto it = values_.find(key);
    const std::size_t old = it == values_.end() ? 0 : key.size() + it->second.size();
    const std::size_t total = total_bytes_ - old + key.size() + value.size();
    if (total > limits_.max_total_bytes)
      return Outcome::error(
          Code::kResourceExhausted,
          str("the store is full (", limits_.max_total_bytes, " bytes): refusing key '", key, "'"));
    if (it == values_.end() && values_.size() >= limits_.max_keys)
      return Outcome::error(Code::kResourceExhausted,
                            str("the store is full (", limits_.max_keys, " keys): refusing key '",
                                key.substr(0, 40), "'"));
    total_bytes_ = total;
    for (auto w = waiters_.begin(); w != waiters_.end();) {
      if (w->second.key != key) {
        ++w;
        continue;
      }
      fire.push_back(std::move(w->second.done));
      w = waiters_.erase(w);
    }
    if (!fire.empty()) {
      values_[key] = value;  // the waiters get copies below
    } else {
      values_[key] = std::move(value);
      return Outcome::success();
    }
  }
  for (auto& done : fire) done(Outcome::success(), value);
  return Outcome::success();
}

Ticket KvStore::get(const std::string& key, TimePoint deadline, TimePoint now, GetCallback done) {
  const Ticket ticket{Ticket::Kind::kGet, next_ticket_id()};
  if (auto o = check_key(key); !o.ok()) {
    done(o, {});
    return ticket;
  }
  std::string value;
  bool aborted = false;
  {
    std::lock_guard lock(mu_);
    if (aborted_) {
      value = *aborted_;
      aborted = true;
    } else if (auto it = values_.find(key); it != values_.end()) {
      value = it->second;
    } else {
      waiters_.emplace(ticket.id, Waiter{key, deadline, now, std::move(done)});
      return ticket;
    }
  }
  if (aborted) {
    done(Outcome::error(Code::kAborted, value), {});
  } else {
    done(Outcome::success(), std::move(value));
  }
  return ticket;
}

void KvStore::cancel(uint64_t id) {
  GetCallback done;
  {
    std::lock_guard lock(mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    done = std::move(it->second.done);
    waiters_.erase(it);
  }
  done(Outcome::error(Code::kCancelled, "the worker cancelled its get"), {});
}

void KvStore::expire(TimePoint now) {
  std::vector<std::pair<GetCallback, Outcome>> fire;
  {
    std::lock_guard lock(mu_);
    fire = take_expired(waiters_, now, [&](const auto& w) {
      return str("key '", w.key, "' was not set within ", format_duration(now - w.since),
                 ": the rank that publishes it has not reached that point (slow start, crashed, or "
                 "another job?)");
    });
  }
  for (auto& [done, outcome] : fire) done(outcome, {});
}

void KvStore::abort(const std::string& why) {
  std::vector<GetCallback> fire;
  {
    std::lock_guard lock(mu_);
    aborted_ = why;
    for (auto& [id, w] : waiters_) fire.push_back(std::move(w.done));
    waiters_.clear();
  }
  for (auto& done : fire) done(Outcome::error(Code::kAborted, why), {});
}

std::optional<std::string> KvStore::peek(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::size_t KvStore::size() const {
  std::lock_guard lock(mu_);
  return values_.size();
}

}  // namespace mddp::coordinator

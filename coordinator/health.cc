#include "coordinator/health.h"

#include <map>

#include "core/common/check.h"

namespace mddp::coordinator {

Health::Health(Options options) : options_(options) {
  MDDP_CHECK(options_.interval.count() > 0 && options_.timeout > options_.interval,
             "heartbeat interval ", options_.interval.count(), " ms, timeout ",
             options_.timeout.count(), " ms");
}

void Health::start(const std::vector<std::string>& hosts, TimePoint now) {
  std::lock_guard lock(mu_);
  ranks_.clear();
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    RankHealth h;
    h.rank = static_cast<int>(r);
    h.host = hosts[r];
    h.last_seen = now;
    ranks_.push_back(std::move(h));
  }
  reported_silent_.assign(hosts.size(), false);
  last_progress_ = now;
  next_roll_call_.reset();
}

void Health::heartbeat(int rank, const Progress& progress, TimePoint now) {
  std::lock_guard lock(mu_);
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  RankHealth& h = ranks_[static_cast<std::size_t>(rank)];
  h.last_seen = std::max(h.last_seen, now);
  ++h.heartbeats;
  if (!(h.progress == progress)) {
    h.progress = progress;
    last_progress_ = now;
    next_roll_call_.reset();
  }
}

Health::LeaveResult Health::leave(int rank, bool ok, const std::string& message, TimePoint now) {
  std::lock_guard lock(mu_);
  LeaveResult result;
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return result;
  RankHealth& h = ranks_[static_cast<std::size_t>(rank)];
  if (!h.left) {
    h.left = true;
    h.left_ok = ok;
    h.leave_message = message;
    h.last_seen = std::max(h.last_seen, now);
    last_progress_ = now;
    next_roll_call_.reset();
    if (!ok)
      result.failure = Failure{
          rank, str("rank ", rank, " (host ", h.host,
                    ") failed: ", message.empty() ? std::string("no reason given") : message)};
  }
  result.all_left = result.all_ok = true;
  for (const auto& r : ranks_) {
    result.all_left = result.all_left && r.left;
    result.all_ok = result.all_ok && r.left && r.left_ok;
  }
  return result;
}

Health::CheckResult Health::check(TimePoint now) {
  std::lock_guard lock(mu_);
  CheckResult result;
  if (ranks_.empty()) return result;

  // The rank silent the longest is the likeliest root cause: report it.
  const RankHealth* silent = nullptr;
  for (const auto& h : ranks_) {
    if (h.left || reported_silent_[static_cast<std::size_t>(h.rank)]) continue;
    if (now - h.last_seen <= options_.timeout) continue;
    if (!silent || h.last_seen < silent->last_seen) silent = &h;
  }
  if (silent) {
    reported_silent_[static_cast<std::size_t>(silent->rank)] = true;
    result.failure =
        Failure{silent->rank, str("rank ", silent->rank, " (host ", silent->host,
                                  ") stopped sending heartbeats: the last came ",
                                  format_duration(now - silent->last_seen), " ago (timeout ",
                                  format_duration(options_.timeout), "), in ",
                                  silent->progress.phase, " of step ", silent->progress.step,
                                  ". Was the process killed (out of memory?) or its host cut off? "
                                  "If it is only slow, raise "
                                  "--heartbeat-timeout-ms")};
  }

  bool running = false;
  for (const auto& h : ranks_) running = running || !h.left;
  const auto stalled = now - last_progress_;
  if (running && stalled > 2 * options_.interval && (!next_roll_call_ || now >= *next_roll_call_)) {
    result.roll_call = "no progress for " + format_duration(stalled) + ": " + roll_call_locked(now);
    next_roll_call_ = now + 10 * options_.interval;
  }
  return result;
}

std::string Health::roll_call(TimePoint now) const {
  std::lock_guard lock(mu_);
  return roll_call_locked(now);
}

std::string Health::roll_call_locked(TimePoint now) const {
  // Each rank's place as (singular verb phrase, plural verb phrase); ranks
  // with the same place are grouped, groups ordered by their lowest rank.
  struct Place {
    std::string one, many;
    std::vector<int> ranks;
  };
  std::vector<Place> places;
  std::map<std::string, std::size_t> index;
  for (const auto& h : ranks_) {
    const Progress& p = h.progress;
    std::string one, many;
    if (h.left) {
      one = h.left_ok ? "has left" : "has left with a failure";
      many = h.left_ok ? "have left" : "have left with a failure";
    } else {
      std::string where;
      if (p.collective_entered > p.collective_completed) {
        where = str(" in ", p.op.empty() ? std::string("collective") : p.op, " #",
                    p.collective_entered);
        if (p.bucket >= 0) where += str(" (bucket ", p.bucket, ")");
        one = "waits" + where;
        many = "wait" + where;
      } else {
        where = str(" last seen in ", p.phase, " of step ", p.step);
        one = "was" + where;
        many = "were" + where;
      }
      if (now - h.last_seen > 2 * options_.interval) {
        const std::string age = " (last heartbeat " + format_duration(now - h.last_seen) + " ago)";
        one += age;
        many += age;
      }
    }
    auto [it, inserted] = index.emplace(one, places.size());
    if (inserted) places.push_back(Place{one, many, {}});
    places[it->second].ranks.push_back(h.rank);
  }
  std::string out;
  for (const auto& pl : places) {
    if (!out.empty()) out += "; ";
    std::string ranks;
    for (std::size_t i = 0; i < pl.ranks.size(); ++i)
      ranks += (i ? ", " : "") + std::to_string(pl.ranks[i]);
    out += pl.ranks.size() == 1 ? "rank " + ranks + " " + pl.one : "ranks " + ranks + " " + pl.many;
  }
  return out;
}

std::vector<RankHealth> Health::ranks() const {
  std::lock_guard lock(mu_);
  return ranks_;
}

}  // namespace mddp::coordinator

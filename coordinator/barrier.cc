#include "coordinator/barrier.h"

#include <algorithm>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::coordinator {

std::string rank_list(const std::vector<int>& ranks) {
  return mddp::join(ranks, ", ");
}

Barrier::Barrier(int world_size) : world_size_(world_size) {
  MDDP_CHECK(world_size >= 1, "world size ", world_size);
}

Ticket Barrier::arrive(const std::string& name, int rank, TimePoint deadline, TimePoint now,
                       Callback done) {
  const Ticket ticket{Ticket::Kind::kBarrier, next_ticket_id()};
  std::vector<Callback> fire;
  Outcome outcome;
  int64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    if (aborted_) {
      outcome = Outcome::error(Code::kAborted, *aborted_);
    } else if (rank < 0 || rank >= world_size_) {
      outcome = Outcome::error(Code::kInvalidArgument,
                               str("rank ", rank, " out of range 0..", world_size_ - 1));
    } else if (name.empty() || name.size() > 256) {
      outcome = Outcome::error(Code::kInvalidArgument, "a barrier needs a name of 1 to 256 bytes");
    } else {
      Named& b = barriers_[name];
      generation = b.generation;
      if (b.arrived.count(rank)) {
        outcome =
            Outcome::error(Code::kFailedPrecondition,
                           str("rank ", rank, " entered barrier '", name, "' twice in generation ",
                               b.generation, " (is another process using this rank's session?)"));
      } else {
        b.arrived.emplace(rank, Arrival{rank, deadline, now, std::move(done), ticket.id});
        if (static_cast<int>(b.arrived.size()) < world_size_) return ticket;
        for (auto& [r, a] : b.arrived) fire.push_back(std::move(a.done));
        b.arrived.clear();
        ++b.generation;
      }
    }
  }
  if (fire.empty()) {
    done(outcome, generation);
  } else {
    for (auto& cb : fire) cb(Outcome::success(), generation);
  }
  return ticket;
}

void Barrier::cancel(uint64_t id) {
  Callback done;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, b] : barriers_) {
      for (auto it = b.arrived.begin(); it != b.arrived.end(); ++it) {
        if (it->second.id != id) continue;
        done = std::move(it->second.done);
        b.arrived.erase(it);
        break;
      }
      if (done) break;
    }
  }
  if (done) done(Outcome::error(Code::kCancelled, "the worker cancelled its barrier"), 0);
}

void Barrier::expire(TimePoint now) {
  struct Fire {
    Callback done;
    Outcome outcome;
    int64_t generation;
  };
  std::vector<Fire> fire;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, b] : barriers_) {
      bool expired = false;
      TimePoint since = now;
      for (const auto& [r, a] : b.arrived) {
        expired = expired || now >= a.deadline;
        since = std::min(since, a.since);
      }
      if (!expired) continue;
      std::vector<int> missing, present;
      for (int r = 0; r < world_size_; ++r) (b.arrived.count(r) ? present : missing).push_back(r);
      const std::string msg =
          str("barrier '", name, "' (generation ", b.generation, ") timed out after ",
              format_duration(now - since), ": rank", missing.size() > 1 ? "s " : " ",
              rank_list(missing), " did not arrive (", rank_list(present), " did)");
      for (auto& [r, a] : b.arrived)
        fire.push_back(
            Fire{std::move(a.done), Outcome::error(Code::kDeadlineExceeded, msg), b.generation});
      b.arrived.clear();
    }
  }
  for (auto& f : fire) f.done(f.outcome, f.generation);
}

void Barrier::abort(const std::string& why) {
  std::vector<Callback> fire;
  {
    std::lock_guard lock(mu_);
    aborted_ = why;
    for (auto& [name, b] : barriers_) {
      for (auto& [r, a] : b.arrived) fire.push_back(std::move(a.done));
      b.arrived.clear();
    }
  }
  for (auto& cb : fire) cb(Outcome::error(Code::kAborted, why), 0);
}

int64_t Barrier::generation(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = barriers_.find(name);
  return it == barriers_.end() ? 0 : it->second.generation;
}

}  // namespace mddp::coordinator

#include "coordinator/rendezvous.h"

#include <algorithm>

#include "core/common/check.h"
#include "core/common/hmac.h"
#include "core/common/strings.h"

namespace mddp::coordinator {

std::string new_session_id() {
  return to_hex(random_bytes(16));
}

Rendezvous::Rendezvous(Options options, TimePoint opened, CompleteHook on_complete)
    : options_(std::move(options)),
      on_complete_(std::move(on_complete)),
      opened_(opened),
      window_end_(opened + options_.timeout) {
  MDDP_CHECK(options_.world_size >= 1, "world size ", options_.world_size);
  MDDP_CHECK(options_.min_nproc <= options_.world_size, "elastic minimum ", options_.min_nproc,
             " above the world size ", options_.world_size);
}

std::string Rendezvous::name() const {
  return options_.attempt > 0 ? str("attempt ", options_.attempt, " of job '", options_.job_id, "'")
                              : str("job '", options_.job_id, "'");
}

static std::string who(const JoinRequest& r) {
  return str("host ", r.host, " pid ", r.pid);
}

std::optional<Outcome> Rendezvous::refusal(const JoinRequest& r) const {
  const int n = options_.world_size;
  if (aborted_) return Outcome::error(Code::kAborted, *aborted_);
  if (timed_out_)
    return Outcome::error(
        Code::kFailedPrecondition,
        "the rendezvous of " + name() + " already timed out; restart the coordinator");
  if (!members_.empty())
    return Outcome::error(
        Code::kResourceExhausted,
        str(name(), " is full: all ", members_.size(), " ranks joined already; this worker (",
            who(r), ") is one too many: check --world-size / --nproc and RANK"));
  if (r.requested_rank >= n)
    return Outcome::error(Code::kInvalidArgument, str("requested rank ", r.requested_rank,
                                                      " (from RANK / SLURM_PROCID) is outside 0..",
                                                      n - 1, " (world size ", n, ")"));
  if (r.requested_rank >= 0) {
    for (const auto& [id, p] : pending_)
      if (p.request.requested_rank == r.requested_rank)
        return Outcome::error(
            Code::kAlreadyExists,
            str("rank ", r.requested_rank, " is already taken by ", who(p.request),
                "; this worker (", who(r), ") asked for it too: give each worker its own RANK"));
  }
  return std::nullopt;
}

std::string Rendezvous::pending_summary() const {
  std::string s = str(pending_.size(), " of ", options_.world_size, " workers joined");
  if (!pending_.empty())
    s +=
        str(" (",
            mddp::join(pending_, ", ", [](const auto& entry) { return who(entry.second.request); }),
            ")");
  return s;
}

bool Rendezvous::elastic_ready_locked(TimePoint now) const {
  return options_.min_nproc > 0 && options_.min_nproc < options_.world_size &&
         now >= opened_ + options_.elastic_wait &&
         static_cast<int>(pending_.size()) >= options_.min_nproc;
}

std::vector<Rendezvous::Pending> Rendezvous::complete_locked() {
  const int n = static_cast<int>(pending_.size());
  std::vector<int> rank_of;  // by position in pending_ (join order)
  if (n == options_.world_size) {
    // All N: requested ranks first, then the free ranks in join order.
    std::vector<bool> taken(static_cast<std::size_t>(n), false);
    for (const auto& [id, p] : pending_)
      if (p.request.requested_rank >= 0)
        taken[static_cast<std::size_t>(p.request.requested_rank)] = true;
    int next_free = 0;
    for (const auto& [id, p] : pending_) {
      int rank = p.request.requested_rank;
      if (rank < 0) {
        while (taken[static_cast<std::size_t>(next_free)]) ++next_free;
        rank = next_free++;
      }
      rank_of.push_back(rank);
    }
  } else {
    // Fewer (elastic): ranks 0..n-1 in the order of the ranks asked for.
    std::vector<std::pair<int, int>> order;  // (asked rank or N, position)
    int pos = 0;
    for (const auto& [id, p] : pending_)
      order.emplace_back(
          p.request.requested_rank >= 0 ? p.request.requested_rank : options_.world_size, pos++);
    std::sort(order.begin(), order.end());
    rank_of.resize(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r)
      rank_of[static_cast<std::size_t>(order[static_cast<std::size_t>(r)].second)] = r;
  }
  members_.resize(static_cast<std::size_t>(n));
  std::vector<Pending> ready;
  std::size_t i = 0;
  for (auto& [id, p] : pending_) {
    const int rank = rank_of[i++];
    members_[static_cast<std::size_t>(rank)] = Member{rank,
                                                      p.request.host,
                                                      p.request.data_addr,
                                                      p.request.device,
                                                      p.request.pid,
                                                      new_session_id(),
                                                      0,
                                                      0,
                                                      p.request.peer};
    p.request.requested_rank = rank;  // remember the assignment for the callbacks
    ready.push_back(std::move(p));
  }
  pending_.clear();
  for (const Member& m : members_) rank_of_session_[m.session] = m.rank;
  return ready;
}

Ticket Rendezvous::join(JoinRequest request, TimePoint deadline, TimePoint now, JoinCallback done,
                        uint64_t id) {
  const Ticket ticket{Ticket::Kind::kJoin, id != 0 ? id : next_ticket_id()};
  std::vector<Pending> ready;
  std::vector<Member> members;
  {
    std::unique_lock lock(mu_);
    if (auto refused = refusal(request)) {
      lock.unlock();
      done(JoinResult{*refused, {}, {}, 0, {}});
      return ticket;
    }
    pending_.emplace(ticket.id, Pending{std::move(request), deadline, std::move(done)});
    if (static_cast<int>(pending_.size()) < options_.world_size && !elastic_ready_locked(now))
      return ticket;
    ready = complete_locked();
    members = members_;
  }
  finish(ready, members, now);
  return ticket;
}

void Rendezvous::finish(std::vector<Pending>& ready, const std::vector<Member>& members,
                        TimePoint now) {
  if (on_complete_) on_complete_(members, now);
  for (auto& p : ready) {
    const Member& self = members[static_cast<std::size_t>(p.request.requested_rank)];
    p.done(JoinResult{Outcome::success(), self, static_cast<int>(members.size()), 0, {}});
  }
}

void Rendezvous::cancel(uint64_t id) {
  JoinCallback done;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    done = std::move(it->second.done);
    pending_.erase(it);
  }
  done(
      JoinResult{Outcome::error(Code::kCancelled, "the worker cancelled its join"), {}, {}, 0, {}});
}

std::optional<std::string> Rendezvous::expire(TimePoint now) {
  std::vector<std::pair<JoinCallback, Outcome>> fire;
  std::optional<std::string> window_closed;
  {
    std::unique_lock lock(mu_);
    if (!members_.empty() || timed_out_ || aborted_) return std::nullopt;
    if (elastic_ready_locked(now)) {  // the rest waited for long enough
      std::vector<Pending> ready = complete_locked();
      const std::vector<Member> members = members_;
      lock.unlock();
      finish(ready, members, now);
      return std::nullopt;
    }
    if (now >= window_end_) {
      const int need = options_.min_nproc > 0 ? options_.min_nproc : options_.world_size;
      const std::string msg = str("rendezvous of ", name(), " timed out after ",
                                  format_duration(options_.timeout), ": ", pending_summary(),
                                  "; start the missing ", need - static_cast<int>(pending_.size()),
                                  " or check --world-size (--rendezvous-timeout-s sets the wait)");
      for (auto& [id, p] : pending_)
        fire.emplace_back(std::move(p.done), Outcome::error(Code::kDeadlineExceeded, msg));
      pending_.clear();
      timed_out_ = true;
      window_closed = msg;
    } else {
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (now < it->second.deadline) {
          ++it;
          continue;
        }
        fire.emplace_back(std::move(it->second.done), Outcome{});
        it = pending_.erase(it);
      }
      const std::string msg =
          str("gave up waiting for the rendezvous (the worker's deadline): ", pending_summary());
      for (auto& f : fire) f.second = Outcome::error(Code::kDeadlineExceeded, msg);
    }
  }
  for (auto& [done, outcome] : fire) done(JoinResult{outcome, {}, {}, 0, {}});
  return window_closed;
}

void Rendezvous::abort(const std::string& why) {
  std::vector<JoinCallback> fire;
  {
    std::lock_guard lock(mu_);
    aborted_ = why;
    for (auto& [id, p] : pending_) fire.push_back(std::move(p.done));
    pending_.clear();
  }
  for (auto& done : fire) done(JoinResult{Outcome::error(Code::kAborted, why), {}, {}, 0, {}});
}

bool Rendezvous::complete() const {
  std::lock_guard lock(mu_);
  return !members_.empty();
}

int Rendezvous::joined() const {
  std::lock_guard lock(mu_);
  return members_.empty() ? static_cast<int>(pending_.size()) : static_cast<int>(members_.size());
}

int Rendezvous::formed_size() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(members_.size());
}

bool Rendezvous::timed_out() const {
  std::lock_guard lock(mu_);
  return timed_out_;
}

std::optional<Member> Rendezvous::member(const std::string& session) const {
  std::lock_guard lock(mu_);
  if (session.empty()) return std::nullopt;
  // A hash lookup, so every call after Join costs O(1) at any world size;
  // the final comparison of the secret is constant-time.
  const auto it = rank_of_session_.find(session);
  if (it == rank_of_session_.end()) return std::nullopt;
  const Member& m = members_[static_cast<std::size_t>(it->second)];
  if (!constant_time_equal(m.session, session)) return std::nullopt;
  return m;
}

std::vector<Member> Rendezvous::members() const {
  std::lock_guard lock(mu_);
  return members_;
}

bool Rendezvous::update_resources(int rank, const Resources& r) {
  std::lock_guard lock(mu_);
  if (rank < 0 || static_cast<std::size_t>(rank) >= members_.size()) return false;
  Member& m = members_[static_cast<std::size_t>(rank)];
  const Member before = m;
  if (!r.device.empty() && r.device.size() <= kMaxDeviceName) m.device = r.device;
  if (r.threads > 0) m.threads = r.threads;
  if (r.cpus > 0) m.cpus = r.cpus;
  return m.device != before.device || m.threads != before.threads || m.cpus != before.cpus;
}

}  // namespace mddp::coordinator

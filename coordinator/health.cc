#include "coordinator/health.h"

#include <algorithm>
#include <map>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::coordinator {

// Note [Who is at fault]
// A rank's process can die (crash, kill -9, OOM kill), hang or stop
// (SIGSTOP, a debugger), or lose the network; and two live ranks can lose
// the link between them. The evidence, and the verdict it gives:
//  * Its Watch stream (held open from join to leave) ends without a Leave:
//    its connection to the coordinator closed. A dead process's kernel
//    closes every socket at once, so this comes within milliseconds; but a
//    live worker whose connection merely dropped reopens it at once. So it
//    is a death when a peer also lost its data-plane connection to that
//    rank (two connections closing together are a process gone), or when
//    the stream stays closed past the grace, min(interval, 1 s). A rank
//    killed just after its join, before its stream opened, counts the same
//    once the connection its Join came on closed (Job::check_join_connections).
//  * A peer on the same host saw its process exit (the shared-memory
//    transport watches the pid): a death, at once.
//  * A peer lost its data-plane connection to it while it stays connected
//    and alive, proven by its own report of the same link or by two of its
//    heartbeats after the report (heartbeats are sequential: the second was
//    sent after the report arrived): the link broke between two live
//    ranks, a network fault.
//    A rank that fails on its own leaves (with its error) before it closes
//    its data plane (worker/worker.cc), so its peers' reports never beat its
//    Leave to blame the link.
//  * Silent past the timeout with its connection open: hung, stopped or
//    cut off. Only a timeout can see these.
// Deaths are judged first: the dead rank is the cause, and the links to it
// broke because of it.

Health::Health(Options options)
    : options_(options),
      grace_(std::min<Clock::duration>(options.interval, std::chrono::seconds(1))) {
  MDDP_CHECK(options_.interval.count() > 0 && options_.timeout > options_.interval,
             "heartbeat interval ", options_.interval.count(), " ms, timeout ",
             options_.timeout.count(), " ms");
}

void Health::start(const std::vector<std::string>& hosts, TimePoint now,
                   const std::vector<int64_t>& pids) {
  std::lock_guard lock(mu_);
  ranks_.clear();
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    RankHealth h;
    h.rank = static_cast<int>(r);
    h.host = hosts[r];
    h.pid = r < pids.size() ? pids[r] : 0;
    h.last_seen = now;
    ranks_.push_back(std::move(h));
  }
  reports_.clear();
  reported_silent_.assign(hosts.size(), false);
  last_progress_ = now;
  next_roll_call_.reset();
}

std::string Health::who(const RankHealth& h) const {
  return h.pid > 0 ? str("rank ", h.rank, " (host ", h.host, ", pid ", h.pid, ")")
                   : str("rank ", h.rank, " (host ", h.host, ")");
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
    h.disconnected.reset();
    if (!ok)
      result.failure = Verdict{
          .cause = Cause::kRankError,
          .rank = rank,
          .host = h.host,
          .pid = h.pid,
          .doing = describe(h.progress),
          .message = str("rank ", rank, " (host ", h.host,
                         ") failed: ", message.empty() ? std::string("no reason given") : message)};
  }
  result.all_left = result.all_ok = true;
  for (const auto& r : ranks_) {
    result.all_left = result.all_left && r.left;
    result.all_ok = result.all_ok && r.left && r.left_ok;
  }
  return result;
}

Clock::duration Health::connected(int rank, TimePoint now) {
  std::lock_guard lock(mu_);
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return {};
  RankHealth& h = ranks_[static_cast<std::size_t>(rank)];
  const Clock::duration away = h.disconnected ? now - *h.disconnected : Clock::duration{};
  h.disconnected.reset();
  return away;
}

void Health::disconnected(int rank, TimePoint now) {
  std::lock_guard lock(mu_);
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  RankHealth& h = ranks_[static_cast<std::size_t>(rank)];
  if (!h.left && !h.disconnected) h.disconnected = now;
}

void Health::peer_fault(int reporter, int peer, comm::PeerFault fault, const std::string& detail,
                        TimePoint now) {
  std::lock_guard lock(mu_);
  const int n = static_cast<int>(ranks_.size());
  if (reporter < 0 || reporter >= n || peer < 0 || peer >= n || peer == reporter ||
      fault == comm::PeerFault::kUnknown)
    return;
  reports_.push_back(PeerReport{reporter, peer, fault, detail, now,
                                ranks_[static_cast<std::size_t>(peer)].heartbeats});
}

bool Health::sweep_disconnected(TimePoint now) {
  std::lock_guard lock(mu_);
  bool all_left = true;
  for (auto& h : ranks_) {
    if (!h.left && h.disconnected && now - *h.disconnected >= grace_) {
      h.left = true;
      h.leave_message = "its process ended without leaving";
    }
    all_left = all_left && h.left;
  }
  return all_left;
}

void Health::forgive(TimePoint now) {
  std::lock_guard lock(mu_);
  for (auto& h : ranks_) {
    h.last_seen = std::max(h.last_seen, now);
    if (h.disconnected) h.disconnected = std::max(*h.disconnected, now);
  }
  last_progress_ = std::max(last_progress_, now);
}

std::optional<Verdict> Health::died_locked(TimePoint now) {
  for (auto& h : ranks_) {
    if (h.left) continue;
    std::vector<int> lost_by, seen_dead_by;  // peers that lost their connection to h / saw it exit
    for (const auto& r : reports_) {
      if (r.peer != h.rank || r.reporter == h.rank) continue;
      auto& list = r.fault == comm::PeerFault::kDied ? seen_dead_by : lost_by;
      if (std::find(list.begin(), list.end(), r.reporter) == list.end()) list.push_back(r.reporter);
    }
    const bool gone_long = h.disconnected && now - *h.disconnected >= grace_;
    if (seen_dead_by.empty() && !(h.disconnected && (!lost_by.empty() || gone_long))) continue;
    auto ranks = [](const std::vector<int>& rs) {
      std::string out;
      for (std::size_t i = 0; i < rs.size(); ++i)
        out += str(i == 0 ? "" : i + 1 == rs.size() ? " and " : ", ", "rank ", rs[i]);
      return out;
    };
    std::string evidence;
    if (h.disconnected)
      evidence = lost_by.empty() && seen_dead_by.empty()
                     ? str("its connection to the coordinator closed and did not come back within ",
                           format_duration(grace_))
                     : "its connection to the coordinator closed";
    if (!seen_dead_by.empty())
      evidence += str(evidence.empty() ? "" : "; ", ranks(seen_dead_by),
                      " on its host saw its process exit");
    if (!lost_by.empty())
      evidence += str(evidence.empty() ? "" : "; ", ranks(lost_by), " lost ",
                      lost_by.size() == 1 ? "its" : "their", " data-plane connection to it");
    const std::string doing = describe(h.progress);
    Verdict v{.cause = Cause::kProcessDied,
              .rank = h.rank,
              .host = h.host,
              .pid = h.pid,
              .doing = doing,
              .message = str(who(h), " died (last seen in ", doing,
                             "): its process ended without leaving the job (", evidence,
                             "). Was it killed (kill -9, out of memory) or did it crash? Its log "
                             "or exit status says which")};
    h.left = true;  // gone: the job does not wait for its Leave
    h.leave_message = v.message;
    return v;
  }
  return std::nullopt;
}

std::optional<Verdict> Health::link_broken_locked() {
  for (const auto& r : reports_) {
    const RankHealth& a = ranks_[static_cast<std::size_t>(r.reporter)];
    const RankHealth& b = ranks_[static_cast<std::size_t>(r.peer)];
    if (a.left || b.left || b.disconnected) continue;
    const bool b_reported = std::any_of(reports_.begin(), reports_.end(), [&](const PeerReport& o) {
      return o.reporter == r.peer && o.peer == r.reporter;
    });
    if (!b_reported && b.heartbeats - r.peer_heartbeats < 2) continue;  // not proven alive yet
    const RankHealth& lo = a.rank < b.rank ? a : b;
    const RankHealth& hi = a.rank < b.rank ? b : a;
    Verdict v{.cause = Cause::kLinkBroken,
              .rank = lo.rank,
              .peer = hi.rank,
              .host = lo.host,
              .pid = lo.pid,
              .doing = describe(lo.progress),
              .message = str("the data-plane connection between rank ", lo.rank, " (host ", lo.host,
                             ") and rank ", hi.rank, " (host ", hi.host,
                             ") broke while both ranks were alive: a network fault, not a lost "
                             "rank (rank ",
                             r.reporter, " saw: ", r.detail,
                             "). Check the network between the two hosts (firewalls, "
                             "connection-tracking limits, a tool that kills connections)")};
    reports_.clear();  // reported once
    return v;
  }
  return std::nullopt;
}

std::optional<Verdict> Health::silent_locked(TimePoint now) {
  // The rank silent the longest is the likeliest root cause: report it.
  const RankHealth* silent = nullptr;
  for (const auto& h : ranks_) {
    if (h.left || reported_silent_[static_cast<std::size_t>(h.rank)]) continue;
    if (now - h.last_seen <= options_.timeout) continue;
    if (!silent || h.last_seen < silent->last_seen) silent = &h;
  }
  if (!silent) return std::nullopt;
  reported_silent_[static_cast<std::size_t>(silent->rank)] = true;
  const std::string doing = describe(silent->progress);
  return Verdict{.cause = Cause::kHeartbeatTimeout,
                 .rank = silent->rank,
                 .host = silent->host,
                 .pid = silent->pid,
                 .doing = doing,
                 .message = str(who(*silent), " stopped sending heartbeats: the last came ",
                                format_duration(now - silent->last_seen), " ago (timeout ",
                                format_duration(options_.timeout), "), in ", doing,
                                ". Is the process stopped (SIGSTOP, a debugger) or hung, or its "
                                "host cut off? If it is only slow, raise --heartbeat-timeout-ms")};
}

Health::CheckResult Health::check(TimePoint now) {
  std::lock_guard lock(mu_);
  CheckResult result;
  if (ranks_.empty()) return result;
  // Note [Who is at fault]: a death first, then a broken link, then silence.
  result.failure = died_locked(now);
  if (!result.failure) result.failure = link_broken_locked();
  if (!result.failure) result.failure = silent_locked(now);

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
    const std::string ranks = mddp::join(pl.ranks, ", ");
    out += pl.ranks.size() == 1 ? "rank " + ranks + " " + pl.one : "ranks " + ranks + " " + pl.many;
  }
  return out;
}

std::vector<RankHealth> Health::ranks() const {
  std::lock_guard lock(mu_);
  return ranks_;
}

}  // namespace mddp::coordinator

#include "coordinator/fingerprint_check.h"

#include <algorithm>

#include "core/common/check.h"
#include "core/common/rank_groups.h"
#include "core/common/strings.h"

namespace mddp::coordinator {

FingerprintCheck::FingerprintCheck(int world_size) : world_size_(world_size) {}

Outcome FingerprintCheck::compare(const std::string& who, const Fingerprint& fp) const {
  const std::string diff = fingerprint_diff(fp, *job_, job_first_);
  if (diff.empty()) return Outcome::success();
  return Outcome::error(
      Code::kFailedPrecondition,
      str(who, " differs from ", job_ranks_, ": ", diff,
          ". Every rank must build the same model from the coordinator's config: run the same "
          "microddp build everywhere"));
}

// Groups the ranks by fingerprint (core/common/rank_groups.h); the largest
// group is the job's, and every rank is answered against it.
void FingerprintCheck::judge(Fire& fire) {
  std::vector<int> ranks;
  for (const auto& [rank, w] : waiting_) ranks.push_back(rank);
  const auto groups = group_ranks(ranks, [&](int a, int b) {
    return fingerprint_diff(waiting_.at(a).fp, waiting_.at(b).fp).empty();
  });
  const std::vector<int>& job = largest_group(groups);
  job_ = waiting_.at(job.front()).fp;
  job_first_ = str("rank ", job.front());
  job_ranks_ = ranks_phrase(job);
  for (auto& [rank, w] : waiting_) fire.emplace_back(std::move(w.done), compare(w.who, w.fp));
  waiting_.clear();
}

Ticket FingerprintCheck::submit(int rank, const std::string& who, Fingerprint fp,
                                TimePoint deadline, TimePoint now, Callback done) {
  const Ticket ticket{Ticket::Kind::kValidate, next_ticket_id()};
  Fire fire;
  {
    std::lock_guard lock(mu_);
    if (aborted_) {
      fire.emplace_back(std::move(done), Outcome::error(Code::kAborted, *aborted_));
    } else if (rank < 0 || rank >= world_size_) {
      fire.emplace_back(std::move(done), Outcome::error(Code::kInvalidArgument,
                                                        str("rank ", rank, " out of range")));
    } else if (job_) {
      fire.emplace_back(std::move(done), compare(who, fp));
    } else {
      if (auto it = waiting_.find(rank); it != waiting_.end())
        fire.emplace_back(std::move(it->second.done),
                          Outcome::error(Code::kCancelled, "replaced by a newer validation"));
      waiting_.insert_or_assign(
          rank, Waiting{ticket.id, who, std::move(fp), deadline, now, std::move(done)});
      if (static_cast<int>(waiting_.size()) == world_size_) judge(fire);
    }
  }
  for (auto& [cb, outcome] : fire) cb(outcome);
  return ticket;
}

void FingerprintCheck::cancel(uint64_t id) {
  Callback done;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(waiting_.begin(), waiting_.end(),
                           [&](const auto& w) { return w.second.id == id; });
    if (it == waiting_.end()) return;
    done = std::move(it->second.done);
    waiting_.erase(it);
  }
  done(Outcome::error(Code::kCancelled, "the worker cancelled its validation"));
}

std::string FingerprintCheck::missing() const {
  std::vector<int> ranks;
  for (int r = 0; r < world_size_; ++r)
    if (!waiting_.count(r)) ranks.push_back(r);
  return ranks.size() == 1 ? str("rank ", ranks[0], " has not validated its model")
                           : str("ranks ", join(ranks, ", "), " have not validated their models");
}

void FingerprintCheck::expire(TimePoint now) {
  Fire fire;
  {
    std::lock_guard lock(mu_);
    const std::string absent = missing();
    fire = take_expired(waiting_, now, [&](const auto& w) {
      return str(w.who, " waited ", format_duration(now - w.since),
                 " for every rank's fingerprint: ", absent, " (still building, or stuck?)");
    });
  }
  for (auto& [cb, outcome] : fire) cb(outcome);
}

void FingerprintCheck::abort(const std::string& why) {
  std::vector<Callback> fire;
  {
    std::lock_guard lock(mu_);
    aborted_ = why;
    for (auto& [rank, w] : waiting_) fire.push_back(std::move(w.done));
    waiting_.clear();
  }
  for (auto& cb : fire) cb(Outcome::error(Code::kAborted, why));
}

}  // namespace mddp::coordinator

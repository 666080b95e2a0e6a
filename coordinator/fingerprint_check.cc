#include "coordinator/fingerprint_check.h"

#include "core/common/check.h"

namespace mddp::coordinator {

FingerprintCheck::FingerprintCheck(int world_size) : world_size_(world_size) {}

Outcome FingerprintCheck::compare(const std::string& who, const Fingerprint& fp) const {
  const std::string diff = fingerprint_diff(fp, *rank0_);
  if (diff.empty()) return Outcome::success();
  return Outcome::error(
      Code::kFailedPrecondition,
      str(who, " differs from rank 0: ", diff,
          ". Every rank must build the same model from the coordinator's config: run the same "
          "microddp build everywhere"));
}

Ticket FingerprintCheck::submit(int rank, const std::string& who, Fingerprint fp,
                                TimePoint deadline, TimePoint now, Callback done) {
  const Ticket ticket{Ticket::Kind::kValidate, next_ticket_id()};
  std::vector<std::pair<Callback, Outcome>> fire;
  {
    std::lock_guard lock(mu_);
    if (aborted_) {
      fire.emplace_back(std::move(done), Outcome::error(Code::kAborted, *aborted_));
    } else if (rank < 0 || rank >= world_size_) {
      fire.emplace_back(std::move(done), Outcome::error(Code::kInvalidArgument,
                                                        str("rank ", rank, " out of range")));
    } else if (rank == 0) {
      rank0_ = std::move(fp);
      fire.emplace_back(std::move(done), Outcome::success());
      for (auto& [id, w] : waiting_) fire.emplace_back(std::move(w.done), compare(w.who, w.fp));
      waiting_.clear();
    } else if (rank0_) {
      fire.emplace_back(std::move(done), compare(who, fp));
    } else {
      waiting_.emplace(ticket.id,
                       Waiting{rank, who, std::move(fp), deadline, now, std::move(done)});
    }
  }
  for (auto& [cb, outcome] : fire) cb(outcome);
  return ticket;
}

void FingerprintCheck::cancel(uint64_t id) {
  Callback done;
  {
    std::lock_guard lock(mu_);
    auto it = waiting_.find(id);
    if (it == waiting_.end()) return;
    done = std::move(it->second.done);
    waiting_.erase(it);
  }
  done(Outcome::error(Code::kCancelled, "the worker cancelled its validation"));
}

void FingerprintCheck::expire(TimePoint now) {
  std::vector<std::pair<Callback, Outcome>> fire;
  {
    std::lock_guard lock(mu_);
    fire = take_expired(waiting_, now, [&](const auto& w) {
      return str(w.who, " waited ", format_duration(now - w.since),
                 " for rank 0's fingerprint: rank 0 has not validated its model (is it still "
                 "building it, or stuck?)");
    });
  }
  for (auto& [cb, outcome] : fire) cb(outcome);
}

void FingerprintCheck::abort(const std::string& why) {
  std::vector<Callback> fire;
  {
    std::lock_guard lock(mu_);
    aborted_ = why;
    for (auto& [id, w] : waiting_) fire.push_back(std::move(w.done));
    waiting_.clear();
  }
  for (auto& cb : fire) cb(Outcome::error(Code::kAborted, why));
}

}  // namespace mddp::coordinator

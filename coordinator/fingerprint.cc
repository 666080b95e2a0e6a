#include "coordinator/fingerprint.h"

#include <algorithm>

#include "core/common/check.h"

namespace mddp::coordinator {
namespace {

template <typename T>
std::string list(const std::vector<T>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The neighbourhood of the first character where a and b differ, quoted.
std::string first_difference(const std::string& a, const std::string& b) {
  constexpr std::size_t kContext = 24;
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const std::size_t from =
      i > kContext + 8 ? i - kContext : 0;  // no "..." to save a few characters
  auto excerpt = [&](const std::string& s) {
    std::string e = s.substr(std::min(from, s.size()), 2 * kContext);
    return std::string(from > 0 ? "'..." : "'") + e +
           (from + 2 * kContext < s.size() ? "...'" : "'");
  };
  return str(excerpt(a), " here vs ", excerpt(b), " on rank 0 (first difference at character ", i,
             ")");
}

}  // namespace

std::string fingerprint_diff(const Fingerprint& mine, const Fingerprint& rank0,
                             std::size_t max_items) {
  std::vector<std::string> items;
  if (mine.version != rank0.version)
    items.push_back(
        str("microddp version ", mine.version, " here vs ", rank0.version, " on rank 0"));
  if (mine.dtype != rank0.dtype)
    items.push_back(str("gradient wire type ", mine.dtype, " here vs ", rank0.dtype,
                        " on rank 0 (--compress)"));
  if (mine.model != rank0.model)
    items.push_back("model " + first_difference(mine.model, rank0.model));
  if (mine.parameters.size() != rank0.parameters.size())
    items.push_back(
        str(mine.parameters.size(), " parameters here vs ", rank0.parameters.size(), " on rank 0"));
  for (std::size_t i = 0; i < std::min(mine.parameters.size(), rank0.parameters.size()); ++i) {
    const auto& a = mine.parameters[i];
    const auto& b = rank0.parameters[i];
    if (a.name != b.name)
      items.push_back(str("parameter ", i, " is '", a.name, "' here vs '", b.name, "' on rank 0"));
    else if (a.shape != b.shape)
      items.push_back(str("parameter ", i, " '", a.name, "': shape ", list(a.shape), " here vs ",
                          list(b.shape), " on rank 0"));
  }
  if (mine.buckets.size() != rank0.buckets.size())
    items.push_back(str(mine.buckets.size(), " buckets here vs ", rank0.buckets.size(),
                        " on rank 0 (--bucket-mb, --first-bucket-mb)"));
  else
    for (std::size_t i = 0; i < mine.buckets.size(); ++i)
      if (mine.buckets[i] != rank0.buckets[i])
        items.push_back(str("bucket ", i, " holds parameters ", list(mine.buckets[i]), " here vs ",
                            list(rank0.buckets[i]), " on rank 0"));

  std::string out;
  for (std::size_t i = 0; i < std::min(items.size(), max_items); ++i)
    out += (i ? "; " : "") + items[i];
  if (items.size() > max_items) out += str("; (and ", items.size() - max_items, " more)");
  return out;
}

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
                 " for rank 0's fingerprint: rank 0 has not validated its model (is it still building it, or stuck?)");
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

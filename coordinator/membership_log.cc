#include "coordinator/membership_log.h"

#include <algorithm>

namespace mddp::coordinator {

MembershipLog::MembershipLog(const std::filesystem::path& run_dir) {
  if (run_dir.empty()) return;
  std::filesystem::create_directories(run_dir);
  file_ = std::make_unique<RecordFile>(run_dir / "membership.jsonl");
}

MembershipLog::~MembershipLog() = default;

void MembershipLog::formed(int attempt, const std::string& how, const std::vector<Member>& members,
                           int64_t global_batch, int64_t since_unix_ns) {
  Formed f{attempt, how, {}, global_batch, since_unix_ns};
  for (const Member& m : members) f.ranks.push_back({m.rank, m.host, m.pid});
  std::lock_guard lock(mu_);
  pending_ = std::move(f);
}

std::optional<nlohmann::json> MembershipLog::trained(int attempt, int64_t step, int64_t unix_ns) {
  std::lock_guard lock(mu_);
  if (!pending_ || pending_->attempt != attempt) return std::nullopt;
  // Every rank's first step of an attempt is the one after the state it
  // started from (a checkpoint's, or the survivors' furthest).
  nlohmann::json line = line_of(*pending_, last_, step - 1, unix_ns);
  last_ = std::move(pending_->ranks);
  pending_.reset();
  lines_.push_back(line);
  if (file_ && file_->append(line.dump() + "\n") != 1) error_ = file_->error();
  return line;
}

std::vector<nlohmann::json> MembershipLog::lines() const {
  std::lock_guard lock(mu_);
  return lines_;
}

std::string MembershipLog::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

// A worker is its (host, pid): the same process keeps it through a shrink
// or a grow, under a new rank.
nlohmann::json MembershipLog::line_of(const Formed& now, const std::vector<Rank>& before,
                                      int64_t from_step, int64_t first_step_unix_ns) {
  const auto json_of = [](const Rank& r) {
    return nlohmann::json{{"rank", r.rank}, {"host", r.host}, {"pid", r.pid}};
  };
  const auto missing_from = [](const std::vector<Rank>& in, const Rank& r) {
    return std::none_of(in.begin(), in.end(),
                        [&](const Rank& o) { return o.host == r.host && o.pid == r.pid; });
  };
  nlohmann::json members = nlohmann::json::array(), left = nlohmann::json::array(),
                 joined = nlohmann::json::array();
  for (const Rank& r : now.ranks) {
    members.push_back(json_of(r));
    if (missing_from(before, r)) joined.push_back(json_of(r));  // its new rank
  }
  for (const Rank& r : before)
    if (missing_from(now.ranks, r)) left.push_back(json_of(r));  // its rank before
  return {{"attempt", now.attempt},
          {"from_step", from_step},
          {"how", now.how},
          {"world_size", now.ranks.size()},
          {"global_batch", now.global_batch},
          {"members", members},
          {"left", left},
          {"joined", joined},
          {"since_unix_ns", now.since_unix_ns},
          {"first_step_unix_ns", first_step_unix_ns},
          // From the end of the attempt before to the end of this one's first step.
          {"to_first_step_s", (first_step_unix_ns - now.since_unix_ns) * 1e-9}};
}

}  // namespace mddp::coordinator

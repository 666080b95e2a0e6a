// The membership log: <run dir>/membership.jsonl, one line per attempt once
// its first training step arrives: the ranks it had (host, pid), who left
// and who joined since the line before, how it formed ("start", "restart":
// every process started again from a checkpoint, "shrink", "grow": the
// survivors went on in their processes, Notes [Shrinking] and [Healing] in
// job.cc), its world size and global batch (shared over the ranks as
// data::even_share says), the step it trained from, and how long the job
// took from the end of the attempt before (its failure, or the newcomer's
// join) to the end of this one's first step. That is what
// `microddp run --replay` needs to run the job again with the same changes
// at the same steps (docs/recovery.md). Job writes the same line into
// metrics.jsonl, with "kind": "membership". An attempt that ended before
// its first step trained nothing, and has no line. Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/rendezvous.h"
#include "core/common/record_file.h"

namespace mddp::coordinator {

class MembershipLog {
 public:
  // `run_dir` "": in memory only. Throws mddp::Error naming the file when it
  // cannot be opened.
  explicit MembershipLog(const std::filesystem::path& run_dir);
  ~MembershipLog();

  // `attempt` formed with `members` (in rank order); `how` as above;
  // `since_unix_ns`: when the attempt before ended (the first: when it formed).
  void formed(int attempt, const std::string& how, const std::vector<Member>& members,
              int64_t global_batch, int64_t since_unix_ns);
  // A training record of `attempt` at `step`, ended at `unix_ns`, arrived.
  // The attempt's first makes its line: returned (also written to the
  // file); else nullopt.
  std::optional<nlohmann::json> trained(int attempt, int64_t step, int64_t unix_ns);
  // Every line so far, oldest first.
  std::vector<nlohmann::json> lines() const;
  // Why the last write to the file failed, or "".
  std::string error() const;

 private:
  struct Rank {
    int rank = 0;
    std::string host;
    int64_t pid = 0;
  };
  struct Formed {
    int attempt = 0;
    std::string how;
    std::vector<Rank> ranks;
    int64_t global_batch = 0;
    int64_t since_unix_ns = 0;
  };
  static nlohmann::json line_of(const Formed& now, const std::vector<Rank>& before,
                                int64_t from_step, int64_t first_step_unix_ns);

  mutable std::mutex mu_;
  std::unique_ptr<RecordFile> file_;  // null: in memory only
  std::optional<Formed> pending_;     // formed, no step yet
  std::vector<Rank> last_;            // the ranks of the last line
  std::vector<nlohmann::json> lines_;
  std::string error_;
};

}  // namespace mddp::coordinator

// The fingerprint check: every rank must build the same model, split it into
// the same buckets and send the same wire type, or DDP silently averages
// unrelated numbers. Each rank sends its fingerprint after building the
// model and waits until every rank's is in; then the ranks are grouped by
// what they built, and each rank outside the largest group (rank 0's on a
// tie) is told how it differs, as one line:
//   "rank 2 (host b) differs from ranks 0, 1, 3: parameter 1 '0.bias': shape [128] here vs
//   [256] on rank 0; ..."
// so a rank 0 that built another model is named, not the rank compared with
// it first (Note [Naming the odd rank] in core/ddp/ddp.cc does the same for
// the model itself). Waits follow Note [Waits complete exactly once]
// (outcome.h). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/fingerprint.h"
#include "coordinator/outcome.h"

namespace mddp::coordinator {

class FingerprintCheck {
 public:
  using Callback = std::function<void(Outcome)>;
  explicit FingerprintCheck(int world_size);

  // Answered once every rank's fingerprint is in (the last call answers all
  // of them); after that, at once, against the job's. A rank that checks
  // again while waiting replaces its fingerprint (the earlier call is
  // cancelled). `who` names the rank in messages ("rank 2 (host b)").
  Ticket submit(int rank, const std::string& who, Fingerprint fp, TimePoint deadline, TimePoint now,
                Callback done);
  void cancel(uint64_t id);
  void expire(TimePoint now);
  void abort(const std::string& why);

 private:
  struct Waiting {
    uint64_t id;
    std::string who;
    Fingerprint fp;
    TimePoint deadline, since;
    Callback done;
  };
  using Fire = std::vector<std::pair<Callback, Outcome>>;
  void judge(Fire& fire);  // under mu_, every rank's fingerprint in
  Outcome compare(const std::string& who, const Fingerprint& fp) const;  // under mu_, judged
  std::string missing() const;  // under mu_: which ranks have not validated

  const int world_size_;
  std::mutex mu_;
  std::map<int, Waiting> waiting_;  // by rank
  // Once judged: the largest group's fingerprint, its ranks and the first of them.
  std::optional<Fingerprint> job_;
  std::string job_ranks_, job_first_;
  std::optional<std::string> aborted_;
};

}  // namespace mddp::coordinator

// The fingerprint check: every rank must build the same model, split it into
// the same buckets and send the same wire type, or DDP silently averages
// unrelated numbers. Each rank sends its fingerprint after building the
// model; ranks 1..N-1 are compared with rank 0's (waiting for it), and a
// difference comes back as one line showing it:
//   "rank 2 (host b) differs from rank 0: parameter 1 '0.bias': shape [128] here vs [256] on rank
//   0; ..."
// Waits follow Note [Waits complete exactly once] (outcome.h). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "control/fingerprint.h"
#include "coordinator/outcome.h"

namespace mddp::coordinator {

class FingerprintCheck {
 public:
  using Callback = std::function<void(Outcome)>;
  explicit FingerprintCheck(int world_size);

  // Rank 0's call is answered at once (and answers those waiting for it);
  // another rank's when rank 0's fingerprint is in. A rank may check again
  // (its fingerprint is replaced). `who` names the rank in messages
  // ("rank 2 (host b)").
  Ticket submit(int rank, const std::string& who, Fingerprint fp, TimePoint deadline, TimePoint now,
                Callback done);
  void cancel(uint64_t id);
  void expire(TimePoint now);
  void abort(const std::string& why);

 private:
  struct Waiting {
    int rank;
    std::string who;
    Fingerprint fp;
    TimePoint deadline, since;
    Callback done;
  };
  Outcome compare(const std::string& who,
                  const Fingerprint& fp) const;  // under mu_, rank 0's present

  const int world_size_;
  std::mutex mu_;
  std::optional<Fingerprint> rank0_;
  std::map<uint64_t, Waiting> waiting_;
  std::optional<std::string> aborted_;
};

}  // namespace mddp::coordinator

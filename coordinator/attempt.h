// Attempt: one rendezvous epoch of a job (Note [Attempts] in job.cc). It
// forms (its own Rendezvous, with its own sessions) and, once formed, holds
// what its ranks share, sized to the ranks it formed with: the fingerprint
// check, the key/value store, the barriers and health. Nothing of it is
// shared with another attempt, so a late message of an attempt that ended
// cannot reach the next one's store or barriers. Its random nonce keys the
// data plane of its ranks (proof.h): a peer of another attempt cannot
// prove itself to them. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/verdict.h"
#include "coordinator/barrier.h"
#include "coordinator/fingerprint_check.h"
#include "coordinator/health.h"
#include "coordinator/kv_store.h"
#include "coordinator/rendezvous.h"

namespace mddp::coordinator {

class Attempt {
 public:
  // What exists once the rendezvous completed.
  struct Formed {
    Formed(int world_size, Health::Options health);
    const int world_size;
    FingerprintCheck fingerprints;
    KvStore store;
    Barrier barrier;
    Health health;
  };
  // Runs once when it formed, after Formed exists and before any joiner hears.
  using FormedHook = std::function<void(Attempt&, const std::vector<Member>&, TimePoint now)>;

  // The rendezvous window opens at `opened`; rendezvous.attempt is set to `number`.
  Attempt(int number, Rendezvous::Options rendezvous, Health::Options health, TimePoint opened,
          FormedHook on_formed);
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  int number() const { return number_; }
  // kNonceBytes random bytes: JoinReply.attempt_nonce.
  const std::string& nonce() const { return nonce_; }
  Rendezvous& rendezvous() { return rendezvous_; }
  const Rendezvous& rendezvous() const { return rendezvous_; }
  std::shared_ptr<Formed> formed() const;  // null while forming
  int world_size() const;                  // formed size; 0 while forming

  // Ends it: every wait in it is aborted with `message` ("attempt 1 ended:
  // ..."). The first call wins and returns true.
  bool end(const Verdict& why, const std::string& message);
  std::optional<Verdict> ended() const;  // why it ended, if it did
  // Fails every wait in it with `why` (a job that failed or shut down).
  void abort(const std::string& why);
  // Deadlines of its waits; the rendezvous window's close message when it
  // closes at `now` before the attempt formed.
  std::optional<std::string> expire(TimePoint now);

 private:
  const int number_;
  const std::string nonce_;
  const Health::Options health_options_;
  const FormedHook on_formed_;
  mutable std::mutex mu_;
  std::shared_ptr<Formed> formed_;
  std::optional<Verdict> ended_;
  Rendezvous rendezvous_;  // last: its hook reaches the members above
};

}  // namespace mddp::coordinator

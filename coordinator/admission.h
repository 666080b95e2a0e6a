// Admission: who may join the job. A worker first asks for a challenge
// (Hello: a random single-use server nonce, valid for a short time), then
// joins with a proof of the token over it (control/proof.h); the token
// itself never travels. A join is refused, each with its own one line and
// in this order: another protocol version (naming both), a server nonce
// that was never handed out, was used already (a replayed join) or expired,
// a proof made without a token ("no token given"), a wrong proof ("wrong
// token": the message reveals nothing about the job), another job id.
// Proofs are compared in constant time. Outstanding nonces are bounded
// (the oldest is dropped first), so a flood of Hellos cannot exhaust
// memory. Thread-safe; time comes from the caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "coordinator/outcome.h"
#include "coordinator/rendezvous.h"

namespace mddp::coordinator {

class Admission {
 public:
  struct Options {
    std::string job_id = "local";
    std::string token;  // "" = none: a proof made with an empty key
    uint32_t protocol_version = control::kProtocolVersion;
    std::chrono::milliseconds nonce_ttl{30'000};
    std::size_t max_nonces = 4096;
  };
  struct Challenge {
    Outcome outcome;
    std::string server_nonce;  // kNonceBytes random bytes, when ok
    std::chrono::milliseconds expires{0};
  };

  explicit Admission(Options options);
  // Hello(job_id, protocol_version): a fresh nonce for one join of `job_id`.
  Challenge hello(const std::string& job_id, uint32_t protocol_version, TimePoint now);
  // Why `r` may not join, or success. Consumes r.server_nonce either way
  // (a nonce answers one join only).
  Outcome admit(const JoinRequest& r, TimePoint now);
  std::size_t outstanding() const;  // nonces handed out and not yet used or expired

 private:
  struct Issued {
    std::string job_id;
    TimePoint expires;
  };
  Outcome version_refusal(uint32_t version) const;

  const Options options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Issued> nonces_;
  std::deque<std::string> order_;  // nonces in the order they were handed out
};

}  // namespace mddp::coordinator

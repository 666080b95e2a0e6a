#include "coordinator/admission.h"

#include "control/proof.h"
#include "core/common/check.h"
#include "core/common/hmac.h"

namespace mddp::coordinator {

Admission::Admission(Options options) : options_(std::move(options)) {
  MDDP_CHECK(options_.max_nonces >= 1 && options_.nonce_ttl.count() > 0);
}

Outcome Admission::version_refusal(uint32_t version) const {
  if (version == options_.protocol_version) return Outcome::success();
  return Outcome::error(
      Code::kFailedPrecondition,
      str("worker speaks control-plane protocol v", version, ", this coordinator v",
          options_.protocol_version, ": run the same microddp build on every machine"));
}

Admission::Challenge Admission::hello(const std::string& job_id, uint32_t protocol_version,
                                      TimePoint now) {
  Challenge c;
  c.outcome = version_refusal(protocol_version);
  if (!c.outcome.ok()) return c;
  if (job_id != options_.job_id) {
    c.outcome =
        Outcome::error(Code::kFailedPrecondition,
                       str("worker asked for job '", job_id, "' but this coordinator runs job '",
                           options_.job_id, "': check --job-id"));
    return c;
  }
  c.server_nonce = random_bytes(kNonceBytes);
  c.expires = options_.nonce_ttl;
  std::lock_guard lock(mu_);
  // Expired or spent nonces leave from the front; a flood pushes out the oldest.
  while (!order_.empty() &&
         (nonces_.size() >= options_.max_nonces || order_.size() >= 2 * options_.max_nonces ||
          !nonces_.count(order_.front()) || nonces_.at(order_.front()).expires <= now)) {
    nonces_.erase(order_.front());
    order_.pop_front();
  }
  nonces_.emplace(c.server_nonce, Issued{job_id, now + options_.nonce_ttl});
  order_.push_back(c.server_nonce);
  return c;
}

Outcome Admission::admit(const JoinRequest& r, TimePoint now) {
  if (Outcome v = version_refusal(r.protocol_version); !v.ok()) return v;
  std::optional<Issued> issued;
  {
    std::lock_guard lock(mu_);
    if (auto it = nonces_.find(r.server_nonce); it != nonces_.end()) {
      issued = it->second;
      nonces_.erase(it);  // single use; order_ forgets it lazily
    }
  }
  if (!issued)
    return Outcome::error(
        Code::kUnauthenticated,
        r.server_nonce.empty()
            ? "join without a server nonce: call Hello first (another microddp build?)"
            : "join refused as a replay: its server nonce was never handed out or was used "
              "already (a join proof counts once; start the worker again)");
  if (now >= issued->expires)
    return Outcome::error(
        Code::kUnauthenticated,
        str("join refused: its server nonce expired (valid ", format_duration(options_.nonce_ttl),
            " after Hello); start the worker again"));
  const std::string expected =
      join_proof(options_.token, r.job_id, r.server_nonce, r.client_nonce, r.host, r.pid);
  if (!constant_time_equal(r.proof, expected)) {
    // The proof a worker with no token makes: tell it how to give one.
    const bool no_token = !options_.token.empty() &&
                          constant_time_equal(r.proof, join_proof("", r.job_id, r.server_nonce,
                                                                  r.client_nonce, r.host, r.pid));
    if (no_token)
      return Outcome::error(Code::kUnauthenticated,
                            "no token given, and this job needs one: give the worker the "
                            "coordinator's token with --token-file FILE (or --token, or the "
                            "MDDP_TOKEN variable)");
    return Outcome::error(Code::kUnauthenticated,
                          "wrong token: this worker is not a member of the job (give it the "
                          "coordinator's --token or --token-file)");
  }
  if (r.job_id != issued->job_id || r.job_id != options_.job_id)
    return Outcome::error(Code::kFailedPrecondition, str("worker asked for job '", r.job_id,
                                                         "' but this coordinator runs job '",
                                                         options_.job_id, "': check --job-id"));
  return Outcome::success();
}

std::size_t Admission::outstanding() const {
  std::lock_guard lock(mu_);
  return nonces_.size();
}

}  // namespace mddp::coordinator

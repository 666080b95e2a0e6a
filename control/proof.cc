#include "control/proof.h"

#include "core/common/hmac.h"

namespace mddp::control {

std::string join_proof(std::string_view token, std::string_view job_id,
                       std::string_view server_nonce, std::string_view client_nonce,
                       std::string_view host, int64_t pid) {
  const std::string pid_text = std::to_string(pid);
  return hmac_sha256(token,
                     transcript({kJoinLabel, job_id, server_nonce, client_nonce, host, pid_text}));
}

std::string data_plane_key(std::string_view token, std::string_view job_id,
                           std::string_view attempt_nonce) {
  return hmac_sha256(token, transcript({kDataLabel, job_id, attempt_nonce}));
}

}  // namespace mddp::control

// What proves membership of a job without the token ever travelling
// (proto/README.md, "Proving the token"; docs/security.md). Both sides
// compute these from the token they hold: the worker sends a proof, the
// coordinator recomputes and compares it in constant time; the data-plane
// key is derived by every worker alike and never sent at all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mddp::control {

inline constexpr std::string_view kJoinLabel = "microddp-join-v2";
inline constexpr std::string_view kDataLabel = "microddp-data-v2";

// HMAC-SHA256(key = token, "microddp-join-v2" | job_id | server_nonce |
// client_nonce | host | pid as decimal text), | the length-prefixed
// concatenation of core/common/hmac.h: 32 raw bytes.
std::string join_proof(std::string_view token, std::string_view job_id,
                       std::string_view server_nonce, std::string_view client_nonce,
                       std::string_view host, int64_t pid);

// The data plane's key for one attempt: HMAC-SHA256(key = token,
// "microddp-data-v2" | job_id | attempt_nonce), 32 raw bytes. A key of
// attempt k is useless in attempt k+1 (another nonce), and it reveals
// nothing of the token.
std::string data_plane_key(std::string_view token, std::string_view job_id,
                           std::string_view attempt_nonce);

}  // namespace mddp::control

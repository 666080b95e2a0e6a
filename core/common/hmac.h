// Message authentication for the job's secrets, through OpenSSL's libcrypto
// (no hand-written crypto): HMAC-SHA256 over a transcript of length-prefixed
// parts, random bytes, and a comparison whose time does not depend on where
// two secrets differ. The control plane proves the job token with these
// (control/proof.h) and the data plane proves the per-attempt key
// (core/comm/transport/tcp/handshake.h, shm/segment.h).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace mddp {

inline constexpr std::size_t kMacBytes = 32;  // an HMAC-SHA256 tag
inline constexpr std::size_t kNonceBytes = 32;

// The parts, each as its length (4 bytes, little-endian) then its bytes: no
// two different lists of parts give the same string ("ab"|"c" is not "a"|"bc").
std::string transcript(std::initializer_list<std::string_view> parts);
// HMAC-SHA256(key, message): kMacBytes raw bytes.
std::string hmac_sha256(std::string_view key, std::string_view message);
// `n` bytes from OpenSSL's CSPRNG; throws mddp::Error if it cannot give them.
std::string random_bytes(std::size_t n);
// Lowercase hex of raw bytes.
std::string to_hex(std::string_view bytes);
// Equal length and contents, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace mddp

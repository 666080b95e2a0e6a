// The data-plane handshake: the first bytes on every TCP connection, before
// any frame. A mutual challenge-response over the attempt's key
// (JobIdentity::key): each end proves it holds the key without sending it,
// over nonces of both ends, so nothing recorded can be replayed and a peer
// of another job or of an earlier attempt (another key) is refused.
//
//   connector -> acceptor   Hello (60 + job bytes, integers little-endian)
//     u32 magic "MDDP" | u16 version | u16 kind = 1 | i32 rank | i32 size |
//     i32 target rank | i32 attempt | u16 job_len | u16 0 | nonce_c[32] | job_id
//   acceptor -> connector   Challenge (80 bytes)
//     u32 magic | u16 version | u16 kind = 2 | i32 rank | i32 size |
//     nonce_a[32] | mac_a[32]
//   connector -> acceptor   Confirm (40 bytes)
//     u32 magic | u16 version | u16 kind = 3 | mac_c[32]
//
//   mac_x = HMAC-SHA256(key, "microddp-handshake-v2" | role_x | job_id |
//           attempt | connector rank | acceptor rank | size | nonce_c | nonce_a)
//   (| the length-prefixed concatenation of core/common/hmac.h, integers as
//   decimal text; role_a = "accept", role_c = "connect": neither end's MAC
//   can stand in for the other's).
//
// The acceptor first checks the hello's claims (magic, version, kind,
// lengths, job id, attempt, size, target, that the rank is one that should
// connect to it) and closes without a word when one is wrong; then sends
// its challenge, and takes the connection only when the confirm's MAC is
// right (compared in constant time). The connector takes the connection
// only when the challenge's MAC is right. Nothing is read past a failed
// step; no message is longer than kMaxHandshakeBytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/comm/types.h"

namespace mddp::comm::tcp {

constexpr uint32_t kHandshakeMagic = 0x5044444d;  // bytes 'M' 'D' 'D' 'P'
constexpr uint16_t kProtocolVersion = 2;
constexpr std::size_t kHandshakeNonceBytes = 32;
constexpr std::size_t kHandshakeMacBytes = 32;
constexpr std::size_t kHelloFixedBytes = 28 + kHandshakeNonceBytes;
constexpr std::size_t kChallengeBytes = 16 + kHandshakeNonceBytes + kHandshakeMacBytes;
constexpr std::size_t kConfirmBytes = 8 + kHandshakeMacBytes;
constexpr std::size_t kMaxIdBytes = 256;
constexpr std::size_t kMaxHandshakeBytes = kHelloFixedBytes + kMaxIdBytes;

struct Hello {
  uint16_t version = kProtocolVersion;
  int32_t rank = 0, size = 0, target = 0, attempt = 0;
  std::string job_id;
  std::string nonce;  // kHandshakeNonceBytes
};

std::string encode_hello(const Hello& h);
// Given the first `have` bytes of a hello: the total size it will have
// (kHelloFixedBytes until the fixed part is in). Sets `refusal` and returns 0
// when the bytes so far already prove it is no hello from our protocol.
std::size_t hello_bytes_needed(const uint8_t* data, std::size_t have, std::string& refusal);
// Decodes a complete hello (hello_bytes_needed() bytes).
Hello decode_hello(const uint8_t* data, std::size_t bytes);
// Why rank `my_rank` of `job` refuses `h` on its claims alone, or "" to go
// on to the challenge. Only ranks above `my_rank` connect to it.
std::string check_hello(const Hello& h, const JobIdentity& job, int my_rank, int size);

// The MAC `role` ("accept" or "connect") proves for the connection `h`
// opened, answered with the acceptor's nonce `nonce_a`.
std::string handshake_mac(std::string_view key, std::string_view role, const Hello& h,
                          std::string_view nonce_a);

struct Challenge {
  int32_t rank = 0, size = 0;
  std::string nonce, mac;  // nonce_a, mac_a
};
std::string encode_challenge(const Challenge& c);
// Decodes kChallengeBytes; why they are no challenge from rank
// `expected_rank` of `size`, or "".
std::string decode_challenge(const uint8_t* data, int expected_rank, int size, Challenge& out);
std::string encode_confirm(std::string_view mac);
// Decodes kConfirmBytes into `mac`; why they are no confirm, or "".
std::string decode_confirm(const uint8_t* data, std::string& mac);

}  // namespace mddp::comm::tcp

// The data-plane handshake: the first bytes on every TCP connection, before
// any frame. The connecting rank (client) sends a Hello; the listening rank
// (server) checks it and answers with an Accept, or closes the connection
// without a word (a stranger learns nothing).
//
//   Hello  (24 + job + token bytes, integers little-endian)
//     u32 magic "MDDP" | u16 version | u16 kind = 1 | i32 rank | i32 size |
//     i32 target rank  | u16 job_len | u16 token_len | job_id | token
//   Accept (16 bytes)
//     u32 magic "MDDP" | u16 version | u16 kind = 2 | i32 rank | i32 size
//
// A hello is refused when the magic, version or kind is wrong (garbage, an
// old build), a length exceeds kMaxIdBytes, the job id differs (another job),
// the token differs (compared in constant time), the size differs, the target
// is not this rank, or the rank is not one that should connect to us.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mddp::comm::tcp {

constexpr uint32_t kHandshakeMagic = 0x5044444d;  // bytes 'M' 'D' 'D' 'P'
constexpr uint16_t kProtocolVersion = 1;
constexpr std::size_t kHelloFixedBytes = 24;
constexpr std::size_t kAcceptBytes = 16;
constexpr std::size_t kMaxIdBytes = 256;

struct Hello {
  uint16_t version = kProtocolVersion;
  int32_t rank = 0, size = 0, target = 0;
  std::string job_id, token;
};

std::string encode_hello(const Hello& h);
// Given the first `have` bytes of a hello: the total size it will have
// (kHelloFixedBytes until the fixed part is in). Sets `refusal` and returns 0
// when the bytes so far already prove it is no hello from our protocol.
std::size_t hello_bytes_needed(const uint8_t* data, std::size_t have, std::string& refusal);
// Decodes a complete hello (hello_bytes_needed() bytes).
Hello decode_hello(const uint8_t* data, std::size_t bytes);
// Why `h` must be refused by rank `my_rank`, or "" to accept. Only ranks
// above `my_rank` connect to it.
std::string check_hello(const Hello& h, std::string_view job_id, std::string_view token, int my_rank, int size);

std::string encode_accept(int32_t rank, int32_t size);
// Why the accept of `expected_rank` is wrong, or "".
std::string check_accept(const uint8_t* data, int expected_rank, int size);

// Equal contents and length, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace mddp::comm::tcp

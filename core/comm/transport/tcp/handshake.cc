#include "core/comm/transport/tcp/handshake.h"

#include <algorithm>

#include "core/common/check.h"

namespace mddp::comm::tcp {
namespace {

constexpr uint16_t kKindHello = 1;
constexpr uint16_t kKindAccept = 2;

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
int32_t get_i32(const uint8_t* p) { return static_cast<int32_t>(static_cast<uint32_t>(get(p, 4))); }

// Checks magic, version and kind of a handshake message; "" when fine.
std::string check_prefix(const uint8_t* p, std::size_t have, uint16_t kind) {
  if (have >= 4 && get(p, 4) != kHandshakeMagic) return "not a microddp data-plane handshake (bad magic bytes)";
  if (have >= 6 && get(p + 4, 2) != kProtocolVersion)
    return str("protocol version ", get(p + 4, 2), ", this build speaks version ", kProtocolVersion,
               " (mixed microddp builds?)");
  if (have >= 8 && get(p + 6, 2) != kind) return str("unexpected handshake message kind ", get(p + 6, 2));
  return "";
}

}  // namespace

std::string encode_hello(const Hello& h) {
  MDDP_CHECK(h.job_id.size() <= kMaxIdBytes && h.token.size() <= kMaxIdBytes,
             "job id and token must be at most ", kMaxIdBytes, " bytes");
  std::string out;
  put(out, kHandshakeMagic, 4);
  put(out, h.version, 2);
  put(out, kKindHello, 2);
  put(out, static_cast<uint32_t>(h.rank), 4);
  put(out, static_cast<uint32_t>(h.size), 4);
  put(out, static_cast<uint32_t>(h.target), 4);
  put(out, h.job_id.size(), 2);
  put(out, h.token.size(), 2);
  return out + h.job_id + h.token;
}

std::size_t hello_bytes_needed(const uint8_t* data, std::size_t have, std::string& refusal) {
  refusal = check_prefix(data, have, kKindHello);
  if (!refusal.empty()) return 0;
  if (have < kHelloFixedBytes) return kHelloFixedBytes;
  std::size_t job = get(data + 20, 2), token = get(data + 22, 2);
  if (job > kMaxIdBytes || token > kMaxIdBytes) {
    refusal = str("job id or token longer than ", kMaxIdBytes, " bytes");
    return 0;
  }
  return kHelloFixedBytes + job + token;
}

Hello decode_hello(const uint8_t* data, std::size_t bytes) {
  MDDP_CHECK(bytes >= kHelloFixedBytes);
  Hello h;
  h.version = static_cast<uint16_t>(get(data + 4, 2));
  h.rank = get_i32(data + 8);
  h.size = get_i32(data + 12);
  h.target = get_i32(data + 16);
  std::size_t job = get(data + 20, 2), token = get(data + 22, 2);
  MDDP_CHECK_EQ(bytes, kHelloFixedBytes + job + token);
  h.job_id.assign(reinterpret_cast<const char*>(data) + kHelloFixedBytes, job);
  h.token.assign(reinterpret_cast<const char*>(data) + kHelloFixedBytes + job, token);
  return h;
}

std::string check_hello(const Hello& h, std::string_view job_id, std::string_view token, int my_rank, int size) {
  // The token first, so a stranger learns nothing about the job from the reason logged.
  if (!constant_time_equal(h.token, token)) return "wrong token (not a member of this job)";
  if (h.job_id != job_id) return str("job id '", h.job_id, "', this is job '", job_id, "'");
  if (h.size != size) return str("world size ", h.size, ", this job has ", size);
  if (h.target != my_rank) return str("it wanted rank ", h.target, ", this is rank ", my_rank);
  if (h.rank <= my_rank || h.rank >= size)
    return str("it claims rank ", h.rank, ", but only ranks ", my_rank + 1, "..", size - 1, " connect to rank ",
               my_rank);
  return "";
}

std::string encode_accept(int32_t rank, int32_t size) {
  std::string out;
  put(out, kHandshakeMagic, 4);
  put(out, kProtocolVersion, 2);
  put(out, kKindAccept, 2);
  put(out, static_cast<uint32_t>(rank), 4);
  put(out, static_cast<uint32_t>(size), 4);
  return out;
}

std::string check_accept(const uint8_t* data, int expected_rank, int size) {
  std::string why = check_prefix(data, kAcceptBytes, kKindAccept);
  if (!why.empty()) return why;
  if (get_i32(data + 8) != expected_rank || get_i32(data + 12) != size)
    return str("the listener is rank ", get_i32(data + 8), " of ", get_i32(data + 12), ", expected rank ",
               expected_rank, " of ", size, " (a stale address in the store?)");
  return "";
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the longer string whatever the contents; fold every difference in.
  std::size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace mddp::comm::tcp

#include "core/comm/transport/tcp/handshake.h"

#include "core/common/check.h"
#include "core/common/hmac.h"

namespace mddp::comm::tcp {
namespace {

constexpr uint16_t kKindHello = 1;
constexpr uint16_t kKindChallenge = 2;
constexpr uint16_t kKindConfirm = 3;
constexpr std::string_view kLabel = "microddp-handshake-v2";

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
int32_t get_i32(const uint8_t* p) {
  return static_cast<int32_t>(static_cast<uint32_t>(get(p, 4)));
}
std::string get_bytes(const uint8_t* p, std::size_t n) {
  return std::string(reinterpret_cast<const char*>(p), n);
}

void put_prefix(std::string& out, uint16_t kind) {
  put(out, kHandshakeMagic, 4);
  put(out, kProtocolVersion, 2);
  put(out, kind, 2);
}

// Checks magic, version and kind of a handshake message; "" when fine.
std::string check_prefix(const uint8_t* p, std::size_t have, uint16_t kind) {
  if (have >= 4 && get(p, 4) != kHandshakeMagic)
    return "not a microddp data-plane handshake (bad magic bytes)";
  if (have >= 6 && get(p + 4, 2) != kProtocolVersion)
    return str("protocol version ", get(p + 4, 2), ", this build speaks version ", kProtocolVersion,
               " (mixed microddp builds?)");
  if (have >= 8 && get(p + 6, 2) != kind)
    return str("unexpected handshake message kind ", get(p + 6, 2));
  return "";
}

}  // namespace

std::string encode_hello(const Hello& h) {
  MDDP_CHECK(h.job_id.size() <= kMaxIdBytes, "job id must be at most ", kMaxIdBytes, " bytes");
  MDDP_CHECK_EQ(h.nonce.size(), kHandshakeNonceBytes);
  std::string out;
  put(out, kHandshakeMagic, 4);
  put(out, h.version, 2);  // the hello's own: a test speaks an old one
  put(out, kKindHello, 2);
  put(out, static_cast<uint32_t>(h.rank), 4);
  put(out, static_cast<uint32_t>(h.size), 4);
  put(out, static_cast<uint32_t>(h.target), 4);
  put(out, static_cast<uint32_t>(h.attempt), 4);
  put(out, h.job_id.size(), 2);
  put(out, 0, 2);
  return out + h.nonce + h.job_id;
}

std::size_t hello_bytes_needed(const uint8_t* data, std::size_t have, std::string& refusal) {
  refusal = check_prefix(data, have, kKindHello);
  if (!refusal.empty()) return 0;
  if (have < kHelloFixedBytes) return kHelloFixedBytes;
  const std::size_t job = get(data + 24, 2);
  if (job > kMaxIdBytes) {
    refusal = str("job id longer than ", kMaxIdBytes, " bytes");
    return 0;
  }
  if (get(data + 26, 2) !=
      0) {  // reserved: a hello means one thing only (found by tests/fuzz/handshake)
    refusal = "a reserved field of the hello is not zero";
    return 0;
  }
  return kHelloFixedBytes + job;
}

Hello decode_hello(const uint8_t* data, std::size_t bytes) {
  MDDP_CHECK(bytes >= kHelloFixedBytes);
  Hello h;
  h.version = static_cast<uint16_t>(get(data + 4, 2));
  h.rank = get_i32(data + 8);
  h.size = get_i32(data + 12);
  h.target = get_i32(data + 16);
  h.attempt = get_i32(data + 20);
  const std::size_t job = get(data + 24, 2);
  MDDP_CHECK_EQ(bytes, kHelloFixedBytes + job);
  h.nonce = get_bytes(data + 28, kHandshakeNonceBytes);
  h.job_id = get_bytes(data + kHelloFixedBytes, job);
  return h;
}

std::string check_hello(const Hello& h, const JobIdentity& job, int my_rank, int size) {
  if (h.job_id != job.job_id) return str("job id '", h.job_id, "', this is job '", job.job_id, "'");
  if (h.attempt != job.attempt)
    return str("it is of attempt ", h.attempt, ", this is attempt ", job.attempt,
               h.attempt < job.attempt ? " (a late peer of an earlier attempt)" : "");
  if (h.size != size) return str("world size ", h.size, ", this job has ", size);
  if (h.target != my_rank) return str("it wanted rank ", h.target, ", this is rank ", my_rank);
  if (h.rank <= my_rank || h.rank >= size)
    return str("it claims rank ", h.rank, ", but only ranks ", my_rank + 1, "..", size - 1,
               " connect to rank ", my_rank);
  return "";
}

std::string handshake_mac(std::string_view key, std::string_view role, const Hello& h,
                          std::string_view nonce_a) {
  const std::string attempt = std::to_string(h.attempt), connector = std::to_string(h.rank),
                    acceptor = std::to_string(h.target), size = std::to_string(h.size);
  return hmac_sha256(key, transcript({kLabel, role, h.job_id, attempt, connector, acceptor, size,
                                      h.nonce, nonce_a}));
}

std::string encode_challenge(const Challenge& c) {
  MDDP_CHECK(c.nonce.size() == kHandshakeNonceBytes && c.mac.size() == kHandshakeMacBytes);
  std::string out;
  put_prefix(out, kKindChallenge);
  put(out, static_cast<uint32_t>(c.rank), 4);
  put(out, static_cast<uint32_t>(c.size), 4);
  return out + c.nonce + c.mac;
}

std::string decode_challenge(const uint8_t* data, int expected_rank, int size, Challenge& out) {
  std::string why = check_prefix(data, kChallengeBytes, kKindChallenge);
  if (!why.empty()) return why;
  out.rank = get_i32(data + 8);
  out.size = get_i32(data + 12);
  if (out.rank != expected_rank || out.size != size)
    return str("the listener is rank ", out.rank, " of ", out.size, ", expected rank ",
               expected_rank, " of ", size, " (a stale address in the store?)");
  out.nonce = get_bytes(data + 16, kHandshakeNonceBytes);
  out.mac = get_bytes(data + 16 + kHandshakeNonceBytes, kHandshakeMacBytes);
  return "";
}

std::string encode_confirm(std::string_view mac) {
  MDDP_CHECK_EQ(mac.size(), kHandshakeMacBytes);
  std::string out;
  put_prefix(out, kKindConfirm);
  out.append(mac);
  return out;
}

std::string decode_confirm(const uint8_t* data, std::string& mac) {
  std::string why = check_prefix(data, kConfirmBytes, kKindConfirm);
  if (!why.empty()) return why;
  mac = get_bytes(data + 8, kHandshakeMacBytes);
  return "";
}

}  // namespace mddp::comm::tcp

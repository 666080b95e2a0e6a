#include "core/common/hmac.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>

#include "core/common/check.h"

namespace mddp {

std::string transcript(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) {
    MDDP_CHECK(p.size() <= UINT32_MAX, "transcript part of ", p.size(), " bytes");
    const auto n = static_cast<uint32_t>(p.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    out.append(p);
  }
  return out;
}

std::string hmac_sha256(std::string_view key, std::string_view message) {
  unsigned char tag[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // HMAC() with a null key pointer would mean "no key"; an empty token is a key of 0 bytes.
  static const unsigned char kEmpty = 0;
  const auto* k = key.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(key.data());
  MDDP_CHECK(HMAC(EVP_sha256(), k, static_cast<int>(key.size()),
                  reinterpret_cast<const unsigned char*>(message.data()), message.size(), tag,
                  &len) != nullptr &&
                 len == kMacBytes,
             "OpenSSL: HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(tag), len);
}

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    throw Error("OpenSSL's random generator failed (RAND_bytes); no nonce can be drawn");
  return out;
}

std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;  // lengths are not secret (a MAC's is fixed)
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace mddp
